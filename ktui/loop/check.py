"""Rung ``check[<shape>]``: the problem's own judge, alongside ktui's metrics.

GPU MODE problems ship ``check_implementation(data, output)``, the check their leaderboard runs.
ktui runs it on every test shape as its own rung, on fresh inputs from a new seed, with the same
care as ``correctness``: the candidate gets its own copy of the inputs with output buffers and
fresh allocations poisoned, and the check gets the pristine inputs.
"""

from __future__ import annotations

from ktui.loop.context import Outcome, RunContext
from ktui.loop.device import synchronize
from ktui.loop.errors import RungFailure


def run(ctx: RunContext, shape: dict) -> Outcome:
    call = ctx.poisoned_call(shape)
    seed, pristine, out = call.seed, call.pristine, call.out
    passed, message = ctx.check(pristine, out)
    synchronize(ctx.tier)
    figures = {"seed": seed, "passed": passed}
    if not passed:
        raise RungFailure(f"check_implementation: {message}", figures)
    return Outcome(figures=figures, message=f"check_implementation passed{': ' + message if message else ''}")
