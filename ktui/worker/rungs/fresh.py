"""Rung ``fresh-shapes``: right on a few shapes the kernel was never shown, not only on ``TESTS``.

A kernel tuned until it passes exactly the declared sizes (a size hard-coded, one block the width
of a declared row) fails here. The shapes are derived from ``TESTS`` by ``shapes.derive`` (seeded
by the run, so ``--seed`` repeats them) or picked from the reference's own ``FRESH_SHAPES``; each
is first tried on the reference alone, and one it rejects (its ``generate_input`` or
``ref_kernel`` raises) is skipped and named. The others are checked exactly as a correctness rung
checks a shape (``correctness.check_once``: poison, metrics, tolerances, mutation, provenance).
"""

from __future__ import annotations

from ktui.worker import shapes
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure, RungSkipped, error_info
from ktui.worker.outcome import Outcome, ReferenceFault, shape_label
from ktui.worker.rungs import correctness
from ktui.worker.tier import synchronize

NAME = "fresh-shapes"
WRONG = "wrong on a shape it was never shown"


def run(ctx: RunContext) -> Outcome:
    tried: list[str] = []
    skipped: list[str] = []
    rejected: list[str] = []
    for shape in planned(ctx):
        label = shape_label(shape)
        why = _rejected(ctx, shape)
        if why:
            skipped.append(label)
            rejected.append(f"{label} ({why})")
            continue
        figures = {"shapes": [*tried, label], "skipped": skipped}
        try:
            correctness.check_once(ctx, shape, ctx.next_seed())
        except ReferenceFault as exc:  # accepted on the first seed, rejected on this one
            skipped.append(label)
            rejected.append(f"{label} ({exc})")
            continue
        except RungFailure as failure:
            failure.figures = {**figures, **failure.figures}
            failure.message = (f"{WRONG}: {label}: {failure.message}" if failure.status == "failed"
                               else f"on a shape it was never shown ({label}): {failure.message}")
            raise
        except Exception as exc:
            info = error_info(exc, ctx.user_files)
            raise RungFailure(f"{WRONG}: {label}: custom_kernel raised {info.type}: {info.message}", figures,
                              error=info) from exc
        tried.append(label)
    if not tried:
        raise RungSkipped(f"the reference rejects every fresh shape: {'; '.join(rejected)}")
    message = f"right on {len(tried)} shape(s) it was never shown: {'; '.join(tried)}"
    if rejected:
        message += f"; skipped (the reference rejects them): {'; '.join(rejected)}"
    return Outcome(figures={"shapes": tried, "skipped": skipped}, message=message)


def plan(ctx: RunContext) -> None:
    """Choose the fresh shapes once, as the ladder starts: compile-ahead builds them beside the
    declared ones (``ktui.worker.ahead``), and the rung checks exactly those."""
    try:
        ctx.fresh_plan = chosen(ctx)
    except RungSkipped as skip:
        ctx.fresh_plan = skip


def planned(ctx: RunContext) -> list[dict]:
    """The shapes ``plan`` chose (choosing them now if it did not run); ``RungSkipped`` if none."""
    if ctx.fresh_plan is None:
        plan(ctx)
    if isinstance(ctx.fresh_plan, RungSkipped):
        raise ctx.fresh_plan
    return list(ctx.fresh_plan)


def chosen(ctx: RunContext) -> list[dict]:
    """The shapes to try; ``RungSkipped`` saying why there are none."""
    count = ctx.job.options.fresh_shapes
    problem = ctx.problem
    if count <= 0:
        raise RungSkipped("turned off (--no-fresh-shapes)")
    if not problem.declares_shapes:
        raise RungSkipped(f"the {problem.format} problem declares no shape list: no fresh shape to derive")
    own = problem.own_fresh_shapes
    if own is not None:
        if not own:
            raise RungSkipped(f"turned off by the reference ({problem.reference_name}: FRESH_SHAPES)")
        return shapes.pick(own, count, ctx.next_seed())
    derived = shapes.derive(ctx.tests, count, ctx.next_seed())
    if not derived:
        raise RungSkipped("no fresh shape: no dimension of TESTS has an undeclared value that keeps what its "
                          "declared values share (FRESH_SHAPES in the reference can list some)")
    return derived


def _rejected(ctx: RunContext, shape: dict) -> str:
    """Why the reference rejects ``shape`` (its input generation or ``ref_kernel`` raises); "" if it does not."""
    try:
        with ctx.phases.timing("inputs"):
            inputs = ctx.generate(shape, ctx.next_seed())
        ctx.ref_kernel(*inputs)
        with ctx.phases.timing("reference"):
            synchronize(ctx.tier)
    except ReferenceFault as exc:
        return str(exc)
    return ""
