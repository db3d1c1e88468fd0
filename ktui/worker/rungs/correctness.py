"""Rung 4, ``correctness[<shape>]``: one per entry of the reference's ``TESTS``.

Each shape gets fresh inputs from a new seed. The candidate runs first, with every ``torch.empty``
it makes poisoned, and any output buffer passed in its inputs poisoned too (so unwritten output
fails), on inputs the reference never sees; the reference then runs on a private copy. The inputs
are checked for mutation, and the output is judged by ``judgement.judge``: ktui's metrics, and the
problem's own check where it has one (GPU MODE), on this same output.
"""

from __future__ import annotations

import torch

from ktui.worker import memory
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure
from ktui.worker.judgement import judge
from ktui.worker.outcome import Outcome
from ktui.worker.tier import same_values, synchronize

STRICT_SEEDS = 3  # fresh inputs per shape in --strict mode


def run(ctx: RunContext, shape: dict) -> Outcome:
    seeds = STRICT_SEEDS if ctx.job.options.strict else 1
    outcome = Outcome()
    for _ in range(seeds):
        outcome = check_once(ctx, shape)
    if seeds > 1:
        outcome.figures["seeds"] = ctx.seeds_used[-seeds:]
    return outcome


def check_once(ctx: RunContext, shape: dict) -> Outcome:
    call = ctx.poisoned_call(shape)
    seed, pristine, out = call.seed, call.pristine, call.out
    learned = ctx.learn_output_slots(call.inputs, pristine, out)
    mutated = _mutated_inputs(ctx.watched_inputs(call.inputs), ctx.watched_inputs(pristine))
    del call  # the candidate's inputs are done with: free them before the reference runs
    ref = ctx.ref_kernel(*pristine)
    with ctx.phases.timing("reference"):
        synchronize(ctx.tier)
    memory.note_footprint(ctx, pristine, out, ref)
    with ctx.phases.timing("metrics"):
        verdict = judge(ctx, pristine, out, ctx.pair(out, ref))
    figures = {"seed": seed, **verdict.figures}
    if verdict.unwritten:
        where = f"; {verdict.where}" if verdict.where else ""
        raise RungFailure(
            f"{verdict.unwritten} output element(s) were never written — they still hold ktui's poison "
            f"({verdict.unwritten_where}): a grid, mask or loop bound that misses them{where}",
            {"seed": seed, "unwritten": verdict.unwritten, **verdict.map_figures()},
        )
    repeat = ctx.note_answer(out, ref, verdict.passed)
    if repeat == "cached" and not verdict.passed:
        raise RungFailure(
            "returned exactly what an earlier call on other inputs returned: a cached answer, not a computed one",
            figures,
            status="suspicious",
        )
    if not verdict.passed:
        also = "; it returned this same output for other inputs too" if repeat == "repeated" else ""
        raise RungFailure(verdict.reason + also, figures)
    if mutated:
        figures["mutated_inputs"] = mutated
        raise RungFailure(
            f"custom_kernel modified its input(s) {mutated}: inputs must be left as they were", figures, status="suspicious"
        )
    return Outcome(figures=figures, message="; ".join(filter(None, [learned, *verdict.notes])))


def _mutated_inputs(inputs: list, pristine: list) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(inputs, pristine))
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and not same_values(a, b)]
