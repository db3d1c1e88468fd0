"""Rung ``dependence``: with the module's kernels turned into no-ops, the answer must be wrong.

Provenance (``provenance.py``) checks that the output's storage went through the module's kernels
and that torch did not compute or write it. This rung asks the converse, once per version: on the
largest test shape and fresh inputs, every launch of the module's kernels, whatever their DSL
(``Dsl.counting`` with ``execute=False``), is recorded but does nothing (nothing is written; outputs
a TileLang kernel would allocate come back poisoned), the output buffers are poisoned as usual, and the candidate's answer is judged like a correctness check. An honest kernel now
returns poison (or raises); a right answer means it did not come from the kernels.
"""

from __future__ import annotations

from ktui.worker import integrity
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure
from ktui.worker.judgement import judge
from ktui.worker.outcome import Outcome, shape_label
from ktui.worker.tier import clone_tree, poisoned_allocations, synchronize


def run(ctx: RunContext) -> Outcome:
    shape = largest(ctx.tests)
    seed = ctx.next_seed()
    inputs = ctx.generate(shape, seed)
    pristine = clone_tree(inputs)
    ctx.poison_outputs(inputs)
    figures = {"shape": shape, "seed": seed}
    label = shape_label(shape)
    try:
        with poisoned_allocations():
            out = ctx.candidate(*inputs, execute=False, kept={integrity.PRIVATE_INPUTS: pristine})
            synchronize(ctx.tier)
    except RungFailure:
        raise
    except Exception as exc:
        return Outcome(figures, f"with its kernels as no-ops custom_kernel raised {type(exc).__name__} on "
                                f"{label}: its answer depends on them")
    del inputs
    ref = ctx.ref_kernel(*pristine)
    synchronize(ctx.tier)
    try:
        pairs = ctx.pair(out, ref)
    except RungFailure as exc:
        return Outcome(figures, f"with its kernels as no-ops the output is malformed on {label} ({exc.message}): "
                                "its answer depends on them")
    verdict = judge(ctx, pristine, out, pairs, mapped=False)  # wrong is what it expects: no map to pay for
    if verdict.passed and not verdict.unwritten:
        raise RungFailure(
            f"with the module's kernels turned into no-ops (launched, nothing run) custom_kernel still returned the "
            f"right answer on {label}: the output does not come from its kernels (torch, a cache or the reference "
            "computed it)",
            figures,
            status="suspicious",
        )
    return Outcome(figures, f"with its kernels as no-ops the answer is wrong on {label}: it comes from them")


def largest(shapes: list[dict]) -> dict:
    """The shape with the most elements, judged by the product of its integer sizes (last on ties)."""

    def size(shape: dict) -> int:
        total = 1
        for value in shape.values():
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                total *= value
        return total

    best = shapes[0]
    for shape in shapes[1:]:
        if size(shape) >= size(best):
            best = shape
    return best
