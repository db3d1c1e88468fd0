"""From what each mutant did on each shape to ``strong`` or ``weak``, with reasons a user can act on.

A mutant that passes on every test shape, or is the right answer itself there (a copy of inputs
that are never negative is a ReLU's answer), is a weakness: a kernel that trivial would be called
correct. One that passes on only some shapes is caught — a kernel must pass every shape — and is
listed with those shapes. Where one weakness explains another (zeros pass, so half-zeros pass
too), only the first is a reason; the others are named after it as passing for the same cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ktui.worker.audit.mutants import Mutant
from ktui.worker.audit.results import (
    CAUGHT,
    FRESH_SEEDS,
    NOT_APPLICABLE,
    OK,
    PASSES,
    SAME,
    SKIPPED,
    WEAK,
    CheckResult,
    Judged,
)

STRONG = "strong"

# A weakness that another one already explains: key (or its kind) → the keys that explain it.
CONSTANT = ("zeros", "ones", "mean")
EXPLAINED_BY: dict[str, tuple[str, ...]] = {
    "near zero": ("zeros",),
    "near constant": (*CONSTANT, "near zero"),
    "mean": ("zeros", "ones"),
    "half": CONSTANT,
    "copy": CONSTANT,
    "unwritten": CONSTANT,
    "replay": (*CONSTANT, "seeds", "near zero", "near constant"),
    "transposed": (*CONSTANT, "near zero", "near constant"),
    "rolled": (*CONSTANT, "near zero", "near constant"),
    "bf16": (*CONSTANT, "near zero"),
    "fp16": (*CONSTANT, "near zero", "bf16"),
    "influence": (*CONSTANT, "seeds", "near zero", "near constant"),
}
# The largest relative rounding error of each low precision (half its machine epsilon).
ROUNDING = {"bf16": ("bfloat16", 2.0**-9), "fp16": ("float16", 2.0**-11)}


@dataclass
class Verdict:
    verdict: str  # STRONG | WEAK
    reasons: list[str] = field(default_factory=list)
    also: list[str] = field(default_factory=list)  # weak checks a reason already explains
    partial: list[str] = field(default_factory=list)  # what passes on only some shapes, with the shapes
    # Weak only on ktui's fresh seeds: ktui's fault, not the test's; as ``reasons`` and ``also`` are.
    fresh_seeds: list[str] = field(default_factory=list)
    fresh_seeds_also: list[str] = field(default_factory=list)

    def summary(self, results: list[CheckResult]) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": self.reasons, "also": self.also, "partial": self.partial,
                "fresh_seeds": self.fresh_seeds, "fresh_seeds_also": self.fresh_seeds_also,
                "checks": len(results), "weak": [r.key for r in results if r.weak]}


def conclude_mutant(mutant: Mutant, shapes: list[tuple[str, Judged]], stats: dict[str, Any]) -> CheckResult:
    """Weak when the mutant passes (or is the right answer itself) on every test shape."""
    rung = f"mutant[{mutant.key}]"
    applicable = [(label, j) for label, j in shapes if j.status != NOT_APPLICABLE]
    if not applicable:
        return CheckResult(mutant.key, rung, SKIPPED, f"not applicable: {mutant.not_applicable or 'no output fits'}")
    passing = [label for label, j in applicable if j.status in (PASSES, SAME)]
    caught = [(label, j) for label, j in applicable if j.status == CAUGHT]
    figures = {"passes": passing, "caught": [label for label, _ in caught], "shapes": len(shapes)}
    if not caught and len(applicable) == len(shapes):
        same = all(j.status == SAME for _, j in applicable)
        how = "identical to the right answer" if same else "passes"
        return CheckResult(mutant.key, rung, WEAK, f"{how} on every shape ({len(shapes)})",
                           reason=mutant_reason(mutant, stats), figures=figures)
    message = f"caught on {len(caught)}/{len(shapes)} shape(s)"
    if passing:
        partial = f"{mutant.title} passes on {_list(passing)} (caught on {len(caught)} other shape(s))"
        return CheckResult(mutant.key, rung, OK, f"{message}; passes on {_list(passing)}", partial=partial,
                           figures=figures)
    first_label, first = caught[0]
    return CheckResult(mutant.key, rung, OK, f"{message} ({first_label}: {first.detail.splitlines()[0][:160]})",
                       figures=figures)


def combine(results: list[CheckResult]) -> Verdict:
    """The reference's verdict from its weak checks; the weaknesses only ktui's fresh seeds show are
    told apart (``fresh_seeds``), each set with the ones another explains named after it."""
    weak = {r.key: r for r in results if r.weak}
    verdict = Verdict(WEAK if weak else STRONG)
    verdict.partial = [r.partial for r in results if r.partial]
    verdict.reasons, verdict.also = _explained([r for r in results if r.weak])
    verdict.fresh_seeds, verdict.fresh_seeds_also = _explained([r for r in results if r.status == FRESH_SEEDS])
    return verdict


def _explained(found: list[CheckResult]) -> tuple[list[str], list[str]]:
    """The reasons of ``found`` that no other of them explains, and the keys of those one does."""
    keys = {r.key for r in found}
    reasons, also = [], []
    for r in found:
        if any(k in keys and k != r.key for k in EXPLAINED_BY.get(_kind(r.key), ())):
            also.append(r.key)
        else:
            reasons.append(r.reason)
    return reasons, also


def fresh_seeds_fault(fresh: CheckResult, own: CheckResult, declared_by: str) -> CheckResult:
    """A check weak on ktui's fresh seeds (``fresh``) and not on the problem's own (``own``): the
    weakness is in the seeds ktui drew, not in the problem's test, and every run checks the problem's
    own seeds too. The check says so, and the reference's verdict does not count it."""
    own_seeds = f"{declared_by}'s seeds"
    what = fresh.reason.split(" — ")[0] if " — " in fresh.reason else f"{fresh.rung}: {fresh.message}"
    caught = own.message.split(" (")[0]
    return CheckResult(fresh.key, fresh.rung, FRESH_SEEDS,
                       f"weak only on ktui's fresh seeds ({fresh.message}); on {own_seeds}: {caught}",
                       reason=f"ktui's own seed problem, not the reference's: {what}, on ktui's fresh seeds; on "
                              f"{own_seeds}, which every run checks too: {caught}",
                       figures={**fresh.figures, "declared": own.figures})


def _kind(key: str) -> str:
    return key.split(" ", 1)[0] if key.startswith(("copy ", "influence ")) else key


# -- the reasons ----------------------------------------------------------------------------------
def mutant_reason(mutant: Mutant, stats: dict[str, Any]) -> str:
    """What passes, why (from the reference's figures), and what to change."""
    head = f"a kernel that returns {mutant.title} passes on every test shape"
    peak, spread, limits = stats.get("peak", 0.0), stats.get("spread", 0.0), stats.get("limits", {})
    check = stats.get("has_check", False)
    dtype = stats.get("dtype", "")
    kind = _kind(mutant.key)
    if kind == "zeros":
        if peak == 0.0:
            return f"{head} — the reference's answer is all zeros; draw inputs whose answer is not zero"
        within = ("the problem's check_implementation accepts zeros" if check else
                  f"within the absolute tolerance of zero (atol={limits.get('atol', 0):g})")
        return (f"{head} — the reference's answers are at most {peak:.2g} in size, {within}; scale the inputs so "
                f"that the answers are well above the tolerance{'' if check else f', or set TOLERANCES for {dtype}'}")
    if kind == "ones":
        return f"{head} — the reference's answer is 1 everywhere on these inputs; draw inputs whose answer varies"
    if kind == "unwritten":
        return (f"{head} — {dtype} has no poison value ktui can recognise, and what unwritten memory holds is the "
                "answer here; draw inputs whose answer varies")
    if kind == "copy":
        name = mutant.key.removeprefix("copy of ")
        smallest = stats.get("input_min", {}).get(name)
        if smallest is not None and smallest >= 0:
            return (f"{head} — {name} is never negative (its smallest value is {smallest:.3g}), so an operation that "
                    "differs only on negative values (ReLU, abs, a clamp at 0) is the identity here; draw inputs "
                    "that cover the whole domain (e.g. torch.randn)")
        return (f"{head} — on these inputs the answer equals {name} within the tolerance; draw inputs on which the "
                "operation changes its input")
    if kind in ROUNDING:
        name, error = ROUNDING[kind]
        by = ("the problem's check_implementation" if check else
              f"ktui's float32 tolerance ({_limits(limits)})")
        fix = "tighten its check" if check else "tighten TOLERANCES"
        return (f"a kernel that computes a float32 answer in {name} passes on every test shape — {by} is looser "
                f"than {name}'s rounding (relative error up to {error:.1e}); if float32 accuracy is meant, {fix}")
    if kind == "mean":
        around = f" around {stats.get('mean', 0.0):.3g}" if stats.get("mean") else ""
        return (f"{head} — the answer hardly varies (its values spread over {spread:.2g}{around}); draw inputs whose "
                "answers vary")
    if kind == "half":
        return (f"{head} — the second half of the answer is zero, or within the tolerance of it; draw inputs whose "
                "answer is not zero where it is checked")
    if kind == "transposed":
        return (f"{head} — the answer is symmetric, or constant, on these inputs; draw inputs without that "
                "symmetry")
    if kind == "rolled":
        return (f"{head} — the answer is (nearly) constant along its last dimension; draw inputs that vary along "
                "it")
    if kind == "replay":
        return (f"{head} — the answer does not change (beyond the tolerance) from one seed to the next; make the "
                "inputs, and so the answer, depend on the seed")
    return head


def _limits(limits: dict[str, Any]) -> str:
    names = {"atol": "atol", "rtol": "rtol", "psnr": "PSNR ≥", "cossim": "cosine ≥"}
    return ", ".join(f"{names[k]}={v:g}" if k in ("atol", "rtol") else f"{names[k]} {v:g}"
                     for k, v in limits.items() if k in names)


def _list(labels: list[str], limit: int = 4) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more
