"""The traced call's inputs, made ahead: after a run, for the next run of the same kernel.

A save's verdict waits for the compile rung, and on the H200 most of that rung was not the compile
(0.09 s for the shipped softmax) but the reference making the traced shape's inputs (0.16 s: 4096 ×
4096 values drawn on the host from a seeded generator). A kernel run twice in a row by one worker
is being iterated on (a watch session, an agent's calls through the MCP server or a workspace's
owner), so once such a run is over the worker makes those inputs for the next one while it waits:
from the same reference version, with a fresh seed of the run's range.

The next run takes them only where they are what it would have made itself — the same reference
version, format, traced shape and device, and seeds of its own drawing (no ``--seed``) from the
range its pre-checks chose (``ktui.worker.seeds``) — and records their seed as its first. Otherwise, or where making them failed, it makes its own, as
before. They are held as the reference returned them, up to ``MAX_BYTES``. Nothing is judged on
them: the traced call compiles, and its output is not checked.
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from ktui.worker import memory
from ktui.worker.outcome import shape_key

MAX_BYTES = 256 * 2**20  # larger inputs would sit in memory between runs for a save that may not come


@dataclass(frozen=True)
class Made:
    """Inputs made for the next run's traced call."""

    key: tuple
    seed: int
    data: Any  # as the reference's generator returned it (``RunContext.placed`` checks and moves it)
    printed: str  # what the reference printed meanwhile: the output of the run that takes them
    seconds: float


@dataclass(frozen=True)
class _Plan:
    key: tuple
    shape: dict
    problem: Any
    job: Any
    tier: Any
    fresh_seeds: Any  # the run's ``seeds.ranges.SeedRange``: the next run's seeds come from the same range


def key_of(job: Any, tier: Any, shape: dict) -> tuple:
    """What inputs depend on: the reference version, its format, the shape and the device."""
    return job.reference_path, job.reference_hash, job.format, shape_key(shape), tier.torch_device


class InputsAhead:
    """One worker's inputs made ahead: planned at the end of a run, made between jobs, taken (or let
    go) by the next run's compile rung."""

    def __init__(self) -> None:
        self._last_kernel: str | None = None
        self._plan: _Plan | None = None
        self._made: Made | None = None

    def take(self, ctx: Any, shape: dict) -> Made | None:
        """The inputs made for this run's traced call on ``shape``, if they are what it would make
        itself. Whatever was held is let go either way."""
        made, self._made = self._made, None
        if made is None or ctx.job.options.seed is not None or made.key != key_of(ctx.job, ctx.tier, shape):
            return None
        if not ctx.fresh_seeds.holds(made.seed):  # this run's pre-checks chose other fresh seeds
            return None
        return made

    def after_run(self, ctx: Any) -> None:
        """Plan the next run's inputs when this kernel ran twice in a row, its traced inputs were
        made and are small enough to hold; otherwise plan nothing."""
        again, self._last_kernel = self._last_kernel == ctx.job.kernel_id, ctx.job.kernel_id
        self._plan = self._made = None
        shape = ctx.traced
        if not again or shape is None or ctx.job.options.seed is not None:
            return
        need = memory.known_sizes(ctx).get(shape_key(shape))
        if need is None or need.inputs > MAX_BYTES:
            return
        self._plan = _Plan(key_of(ctx.job, ctx.tier, shape), shape, ctx.problem, ctx.job, ctx.tier, ctx.fresh_seeds)

    def make(self) -> None:
        """Make the planned inputs: the worker calls this between jobs, after the run's end. A
        failure leaves nothing made; the next run then makes its own and reports what fails."""
        plan, self._plan = self._plan, None
        if plan is None:
            return
        from ktui.worker.modules import job_imports
        from ktui.worker.timing import gpu_lock

        seed = plan.fresh_seeds.draw(random.Random())
        printed = io.StringIO()
        started = time.perf_counter()
        try:
            with contextlib.ExitStack() as scope:
                if plan.tier.is_gpu:  # a GPU MODE or KernelBench generator runs on the GPU
                    scope.enter_context(gpu_lock.share(gpu_lock.device_key()))
                scope.enter_context(job_imports(plan.job))
                scope.enter_context(contextlib.redirect_stdout(printed))
                scope.enter_context(contextlib.redirect_stderr(printed))
                scope.enter_context(plan.problem.scope())
                data = plan.problem.generate(plan.shape, seed)
        except (Exception, SystemExit):
            return
        self._made = Made(plan.key, seed, data, printed.getvalue(), round(time.perf_counter() - started, 4))


def replay_output(made: Made) -> None:
    """Write what the reference printed while making ``made``, in the run that takes them."""
    if made.printed:
        sys.stdout.write(made.printed)
        sys.stdout.flush()
