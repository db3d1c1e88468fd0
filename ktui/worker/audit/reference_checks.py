"""The reference itself: reproducible, moved by its seed, not near zero or constant, moved by every
input.

Per shape, ``observe`` reads what a draw already holds and ``influence`` perturbs one input (the
same input from the other seed's draw, or noise where it is the same for every seed) and judges the
old answer against the new one, as the judgement would judge a kernel that ignores that input.
``conclude`` turns the shapes' observations into one check each: a property that holds on every
test shape is a weakness; on only some, a note.
"""

from __future__ import annotations

from typing import Any

import torch

from ktui.protocol.job import KERNELBENCH
from ktui.worker.audit import draws
from ktui.worker.audit.draws import Draw, spread_of
from ktui.worker.audit.mutants import judge_candidate
from ktui.worker.audit.results import NOT_APPLICABLE, OK, PASSES, SAME, SKIPPED, WEAK, CheckResult
from ktui.worker.context import RunContext
from ktui.worker.leaves import leaf_at, with_leaf
from ktui.worker.metrics import dtype_name, thresholds_for
from ktui.worker.outputs import flatten
from ktui.worker.tier import clone_tree, same_values


def observe(ctx: RunContext, draw: Draw) -> dict[str, Any]:
    """One shape's figures: reproducibility, seed sensitivity, the answer's size and spread, the
    inputs' smallest values (a ReLU on inputs that are never negative is the identity)."""
    outputs = [t for t in flatten(draw.ref_b) if isinstance(t, torch.Tensor) and t.numel()]
    figures: dict[str, Any] = {
        "inputs_reproducible": draw.inputs_reproducible,
        "answer_repeat": draw.answer_repeat,
        "inputs_differ": not same_values([leaf_at(draw.inputs_a, p) for p, _ in draw.leaves],
                                         [leaf_at(draw.inputs_b, p) for p, _ in draw.leaves]),
        "answers_differ": not same_values(draw.ref_a, draw.ref_b),
        "has_check": ctx.problem.has_check,
        "input_min": {name: _smallest(leaf_at(draw.inputs_b, path)) for path, name in draw.leaves},
    }
    near_zero = bool(outputs)
    near_constant = sum(t.numel() for t in outputs) > 1  # one number is constant, and says nothing
    peak = spread = 0.0
    for r in outputs:
        limits = thresholds_for(r.dtype, ctx.tolerances)
        atol, rtol = limits.get("atol"), limits.get("rtol")
        values = spread_of(r)
        if values is None:
            near_zero = near_constant = False
            continue
        top, low, high, mean = values.top, values.low, values.high, values.mean
        peak, spread = max(peak, top), max(spread, high - low)
        near_zero = near_zero and (top <= atol if atol is not None else top == 0.0)
        allowed = (atol or 0.0) + (rtol or 0.0) * abs(mean) if atol is not None else 0.0
        near_constant = near_constant and (high - low) / 2 <= allowed
        figures.setdefault("dtype", dtype_name(r.dtype))
        figures.setdefault("mean", mean)
        figures.setdefault("limits", {k: v for k, v in limits.items() if v is not None})
    figures.update(peak=peak, spread=spread, near_zero=near_zero, near_constant=near_constant)
    return figures


def influence(ctx: RunContext, draw: Draw, path: tuple) -> tuple[str, bool]:
    """Whether the input at ``path`` influences the answer as the test sees it: ``(status, same
    for every seed)``, the status ``passes`` when the old answer still passes for the new input."""
    old, other = leaf_at(draw.inputs_a, path), leaf_at(draw.inputs_b, path)
    constant = same_values(old, other)
    if not constant and other.shape == old.shape and other.dtype == old.dtype:
        new = other.clone()
    elif old.dtype.is_floating_point and old.numel():
        values = spread_of(old)
        scale = values.mean_magnitude if values is not None and values.mean_magnitude > 0 else 1.0
        noise = torch.Generator(device=old.device).manual_seed(draw.seed_b)
        new = old + (scale * torch.randn(old.shape, generator=noise, device=old.device)).to(old.dtype)
    else:
        return NOT_APPLICABLE, constant
    perturbed = with_leaf(clone_tree(draw.inputs_a), path, new)
    answer = draws.reference(ctx, perturbed, draw.label, draw.seed_a)
    judged = judge_candidate(ctx, perturbed, answer, clone_tree(draw.ref_a))
    return (PASSES if judged.status in (PASSES, SAME) else judged.status), constant


def _smallest(t: torch.Tensor) -> float | None:
    values = spread_of(t) if t.numel() and t.dtype != torch.bool else None
    return values.low if values is not None else None


# -- conclusions across shapes --------------------------------------------------------------------
def conclude(ctx: RunContext, seen: list[tuple[str, dict]], ignored: dict[str, list[tuple[str, str, bool]]]
             ) -> list[CheckResult]:
    generator = "get_inputs()" if ctx.job.format == KERNELBENCH else "generate_input"
    results = [_same_inputs(seen, generator), _same_answer(seen, ctx.problem.reference_call),
               _seeds(seen, generator), _magnitude(seen)]
    results += [_influence(name, shapes) for name, shapes in ignored.items()]
    return results


def _labels(seen: list[tuple[str, dict]], test) -> list[str]:
    return [label for label, figures in seen if test(figures)]


def _same_inputs(seen, generator: str) -> CheckResult:
    rung = "reference[same seed, same inputs]"
    bad = _labels(seen, lambda f: not f["inputs_reproducible"])
    if bad:
        return CheckResult("reproducible inputs", rung, WEAK, f"different inputs for the same seed on {_list(bad)}",
                           reason=f"{generator} gives different inputs when called twice with the same seed (on "
                                  f"{_list(bad)}) — a failure cannot be reproduced with --seed; draw every random "
                                  "value from a generator seeded with the seed it is given")
    return CheckResult("reproducible inputs", rung, OK, f"identical inputs for the same seed on {len(seen)} shape(s)")


def _same_answer(seen, reference: str) -> CheckResult:
    rung = "reference[same inputs, same answer]"
    repeats = [(label, f["answer_repeat"]) for label, f in seen]
    beyond = [(label, r) for label, r in repeats if not r.get("identical") and not r.get("within_tolerance")]
    if beyond:
        worst = max(r.get("max_abs", 0.0) for _, r in beyond)
        where = _list([label for label, _ in beyond])
        return CheckResult("reproducible answer", rung, WEAK, f"answers differ by up to {worst:.2g} on {where}",
                           reason=f"{reference} gives answers that differ by up to {worst:.2g} for the same inputs "
                                  f"(on {where}), beyond the tolerance — a right kernel can fail at random; make the "
                                  "reference deterministic (e.g. accumulate in float64) or loosen TOLERANCES",
                           figures={"max_abs": worst})
    drift = [(label, r["max_abs"]) for label, r in repeats if not r.get("identical")]
    if drift:
        label, worst = max(drift, key=lambda item: item[1])
        return CheckResult("reproducible answer", rung, OK,
                           f"answers within the tolerance, not identical: largest difference {worst:.2g} on {label}",
                           figures={"max_abs": worst})
    return CheckResult("reproducible answer", rung, OK, f"identical answers to the same inputs on {len(seen)} shape(s)")


def _seeds(seen, generator: str) -> CheckResult:
    rung = "reference[different seeds]"
    same_inputs = _labels(seen, lambda f: not f["inputs_differ"])
    same_answers = _labels(seen, lambda f: not f["answers_differ"])
    if len(same_inputs) == len(seen):
        return CheckResult("seeds", rung, WEAK, "the same inputs for every seed on every shape",
                           reason=f"{generator} gives the same inputs whatever the seed, on every test shape — a "
                                  "kernel can memorise one answer; draw every random value from the seed")
    if len(same_answers) == len(seen):
        return CheckResult("seeds", rung, WEAK, "the same answer for every seed on every shape",
                           reason="the reference's answer is exactly the same for different seeds, on every test "
                                  "shape — a kernel can return one memorised answer; make the answer depend on the "
                                  "inputs")
    partial = f"the same answer for different seeds on {_list(same_answers)}" if same_answers else ""
    return CheckResult("seeds", rung, OK, f"different inputs and answers for different seeds on "
                       f"{len(seen) - len(same_answers)}/{len(seen)} shape(s)", partial=partial)


def _magnitude(seen) -> CheckResult:
    rung = "reference[answer size and spread]"
    figures = [f for _, f in seen]
    peak = max(f["peak"] for f in figures)
    spread = max(f["spread"] for f in figures)
    limits = figures[0].get("limits", {})
    summary = {"peak": peak, "spread": spread, "limits": limits}
    judged_by_check = figures[0]["has_check"]
    if all(f["near_zero"] for f in figures) and not judged_by_check:
        atol = limits.get("atol", 0.0)
        scale = (" and the cosine similarity that still judges them cannot see a wrong scale (the answer × 2 passes)"
                 if limits.get("cossim") is not None and peak > 0 else "")
        return CheckResult("near zero", rung, WEAK, f"near zero on every shape (at most {peak:.2g}, atol={atol:g})",
                           reason=f"the reference's answers are at most {peak:.2g} in size, within the absolute "
                                  f"tolerance atol={atol:g}: element by element anything that small passes{scale}; "
                                  "scale the inputs so the answers are well above atol, or set TOLERANCES",
                           figures=summary)
    if all(f["near_constant"] for f in figures) and not judged_by_check:
        return CheckResult("near constant", rung, WEAK, f"nearly constant on every shape (spread {spread:.2g})",
                           reason=f"the reference's answer is nearly constant on every test shape (its values spread "
                                  f"over {spread:.2g}, within the tolerance) — a constant passes; draw inputs whose "
                                  "answers vary", figures=summary)
    flat = _labels(seen, lambda f: f["near_zero"] or f["near_constant"])
    partial = f"nearly constant on {_list(flat)}" if flat and not judged_by_check else ""
    return CheckResult("magnitude", rung, OK, f"answers up to {peak:.3g} in size, spread over up to {spread:.3g}",
                       partial=partial, figures=summary)


def _influence(name: str, shapes: list[tuple[str, str, bool]]) -> CheckResult:
    rung = f"reference[{name} influences the answer]"
    key = f"influence of {name}"
    perturbed = [(label, status, constant) for label, status, constant in shapes if status != NOT_APPLICABLE]
    if not perturbed:
        return CheckResult(key, rung, SKIPPED, "not perturbed: an integer input that is the same for every seed")
    ignored = [label for label, status, _ in perturbed if status == PASSES]
    if len(ignored) == len(shapes) and all(constant for _, _, constant in perturbed):
        return CheckResult(key, rung, OK, "the same for every seed and ignored by the reference: an output buffer?")
    if len(ignored) == len(shapes):
        return CheckResult(key, rung, WEAK, "ignored on every shape: the old answer passes for a new input",
                           reason=f"{name} does not influence the answer: drawn afresh, the old answer still passes "
                                  f"on every test shape — a kernel that ignores {name} passes; make the answer depend "
                                  "on it, or leave it out")
    partial = f"{name} does not influence the answer on {_list(ignored)}" if ignored else ""
    return CheckResult(key, rung, OK, f"changing it changes the answer on {len(perturbed) - len(ignored)}/"
                       f"{len(shapes)} shape(s)", partial=partial)


def _list(labels: list[str], limit: int = 4) -> str:
    more = f" and {len(labels) - limit} more" if len(labels) > limit else ""
    return ", ".join(labels[:limit]) + more
