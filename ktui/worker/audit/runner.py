"""One reference's audit: load it as ``ktui run`` would, draw every test shape, judge every mutant.

The reference is loaded with its format's adapter (``ktui.worker.formats``) into a ``RunContext``
with no kernel, so inputs, the reference's answer, the output buffers of GPU MODE's ``data`` and
the problem's own check are exactly what a kernel's correctness rungs use. Shapes are audited one
at a time and their tensors freed before the next: a KernelBench problem's inputs are gigabytes.
Every step runs under the caller's ``step`` (a time limit, and the name a hang is told by).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager

from ktui.worker import formats
from ktui.worker.audit import draws, reference_checks
from ktui.worker.audit.draws import AuditError
from ktui.worker.audit.mutants import Mutant, is_fast, judge_candidate, judge_output, mutants_for
from ktui.worker.audit.results import CAUGHT, NOT_APPLICABLE, OK, CheckResult, Judged
from ktui.worker.audit.verdict import Verdict, combine, conclude_mutant, fresh_seeds_fault
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure, error_info
from ktui.worker.ladder import unique_names
from ktui.worker.modules import load_module
from ktui.worker.outcome import shape_label
from ktui.worker.seeds import choice
from ktui.worker.tier import clone_tree

Step = Callable[[str], ContextManager[None]]


@dataclass(frozen=True)
class Settings:
    shapes: int | None = None  # audit only the first N test shapes (reduced repetitions for a corpus)
    fast: bool = False  # only the fast mutants (``is_fast``) beside the reference's own checks


@dataclass
class Audit:
    results: list[CheckResult] = field(default_factory=list)
    verdict: Verdict | None = None
    shapes: list[str] = field(default_factory=list)


def load(ctx: RunContext) -> choice.Choice:
    """Import the reference from the job's text and wrap it in its format's adapter (no kernel);
    choose the fresh seeds as a run's pre-checks do (``ktui.worker.seeds``)."""
    job = ctx.job
    ctx.user_files = {job.reference_path, *job.problem.get("modules", {}).values()}
    name = Path(job.reference_path).name
    try:
        ctx.reference = load_module(f"ktui_user_ref_{job.run_id[:8]}_{Path(name).stem}", job.reference_path,
                                    job.source or None)
        ctx.problem = formats.load_problem(job, ctx.tier, None, ctx.reference, ctx.next_seed)
    except RungFailure as failure:
        raise AuditError(failure.message, failure.error) from None
    except Exception as exc:
        info = error_info(exc, ctx.user_files)
        where = f"{Path(info.location.file).name}:{info.location.line}: " if info.location else ""
        raise AuditError(f"{where}loading {name} raised {info.type}: {info.message}", info) from None
    bad = [t for t in ctx.tests if not isinstance(t, dict)]
    if bad:
        raise AuditError(f"reference {name}: shapes must be dicts, got {bad[0]!r}")
    if not ctx.tests:
        raise AuditError(f"reference {name} has no test shapes: nothing to audit")
    try:
        return choice.choose(ctx)
    except Exception as exc:
        info = error_info(exc, ctx.user_files)
        raise AuditError(f"comparing the inputs of {name}'s declared and fresh seeds raised {info.type}: "
                         f"{info.message}", info) from None


def audit(ctx: RunContext, settings: Settings, step: Step = lambda what: contextlib.nullcontext(),
          seeds: choice.Choice | None = None) -> Audit:
    """Every check on every shape, on fresh seeds (``seeds``: where they come from, a line of its own).
    Where a shape's case declares a seed, the mutants and the reference's checks that read answers
    are also judged on that seed's inputs: a weakness only ktui's fresh seeds show is ktui's own
    (``verdict.fresh_seeds_fault``), never counted against the reference."""
    shapes = ctx.tests[: settings.shapes] if settings.shapes else list(ctx.tests)
    labels = unique_names([shape_label(s) for s in shapes])
    own_by = ctx.problem.declared_by
    mutants: dict[str, Mutant] = {}
    judged: dict[str, dict[str, Judged]] = {}  # mutant → shape → what it did
    judged_own: dict[str, dict[str, Judged]] = {}  # the same on the problem's own seeds
    seen: list[tuple[str, dict]] = []
    seen_own: list[tuple[str, dict]] = []
    ignored: dict[str, list[tuple[str, str, bool]]] = {}
    for shape, label, own_seed in zip(shapes, labels, ctx.problem.test_seeds):
        with step(f"drawing inputs and answers for {label}"):
            draw = draws.draw(ctx, shape, label)
        own = None
        if own_seed is not None:
            with step(f"drawing inputs and answers for {label} from {own_by}'s seed {own_seed}"):
                own = draws.declared(ctx, draw, own_seed)
            seen_own.append((label, reference_checks.observe(ctx, own)))
        if ctx.problem.has_check:  # ktui's metrics always accept the answer itself; a problem's check may not
            with step(f"judging the reference's own answer on {label}"):
                _control(ctx, draw)
        seen.append((label, reference_checks.observe(ctx, draw)))
        for path, name in draw.leaves:
            with step(f"perturbing {name} on {label}"):
                status, constant = reference_checks.influence(ctx, draw, path)
            ignored.setdefault(name, []).append((label, status, constant))
        for mutant in mutants_for(draw):
            if settings.fast and not is_fast(mutant):
                continue
            mutants.setdefault(mutant.key, mutant)
            with step(f"judging the mutant '{mutant.key}' on {label}"):
                judged.setdefault(mutant.key, {})[label] = judge_candidate(ctx, draw.inputs_b, draw.ref_b,
                                                                          mutant.build(draw))
            if own is not None:
                with step(f"judging the mutant '{mutant.key}' on {label}, {own_by}'s seed"):
                    judged_own.setdefault(mutant.key, {})[label] = judge_candidate(ctx, own.inputs_b, own.ref_b,
                                                                                  mutant.build(own))
        del draw, own
    results = reference_checks.conclude(ctx, seen, ignored)
    own_labels = [label for label, _ in seen_own]
    if own_labels:  # the reference's checks that read the answers (influence is perturbed on fresh seeds only)
        own_checks = {r.rung: r for r in reference_checks.conclude(ctx, seen_own, {})}
        results = [_judged_on_own(r, own_checks[r.rung], own_by) if r.rung in own_checks else r for r in results]
    if seeds is not None:
        results.append(CheckResult("fresh seeds", "seeds[fresh]", OK, seeds.note(), figures=seeds.figures()))
    stats, own_stats = _stats(seen), _stats(seen_own) if seen_own else {}
    for key, mutant in mutants.items():
        shapes_done = [(label, judged[key].get(label, Judged(NOT_APPLICABLE))) for label in labels]
        result = conclude_mutant(mutant, shapes_done, stats)
        if own_labels:
            own_done = [(label, judged_own.get(key, {}).get(label, Judged(NOT_APPLICABLE))) for label in own_labels]
            result = _judged_on_own(result, conclude_mutant(mutant, own_done, own_stats), own_by)
        results.append(result)
    return Audit(results, combine(results), labels)


def _judged_on_own(fresh: CheckResult, own: CheckResult, declared_by: str) -> CheckResult:
    """``fresh`` as concluded on ktui's fresh seeds, unless it is weak there and not on the problem's own."""
    return fresh_seeds_fault(fresh, own, declared_by) if fresh.weak and not own.weak else fresh


def _control(ctx: RunContext, draw: draws.Draw) -> None:
    """The reference's own answer must pass the judgement the mutants get, or nothing it says counts."""
    try:
        judged = judge_output(ctx, draw.inputs_b, draw.ref_b, clone_tree(draw.ref_b))
    except Exception as exc:
        info = error_info(exc, ctx.user_files)
        raise AuditError(f"judging the reference's own answer on {draw.label} raised {info.type}: {info.message}",
                         info) from None
    if judged.status == CAUGHT:
        raise AuditError(f"the reference's own answer fails its test on {draw.label}: {judged.detail}")


def _stats(seen: list[tuple[str, dict]]) -> dict[str, Any]:
    """The reference's figures over every shape, for the reasons' words."""
    figures = [f for _, f in seen]
    smallest: dict[str, float] = {}
    for f in figures:
        for name, value in f["input_min"].items():
            if value is not None:
                smallest[name] = min(value, smallest.get(name, value))
    first = next((f for f in figures if "dtype" in f), figures[0])
    return {"peak": max(f["peak"] for f in figures), "spread": max(f["spread"] for f in figures),
            "mean": first.get("mean", 0.0), "limits": first.get("limits", {}), "dtype": first.get("dtype", ""),
            "has_check": first["has_check"], "input_min": smallest}
