"""One compile-ahead helper process: ``python -m ktui.worker.ahead`` (see the package's docstring).

Protocol, one JSON line each way: the worker sends ``{"job": …, "shapes": […]}``; the helper
answers ``{"type": "ready"}`` once, then ``{"type": "done", "compiled": n, "s": …}`` per request.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

from ktui.protocol import processes

MAX_SHAPE_BYTES = 256 * 2**20  # a helper leaves larger shapes to the worker (``too_large``)
# Below the worker's priority: a save waits for the worker's own compile and its dumps' nvdisasm, never
# for a helper. (On the H200 the compile rung took 0.29 s beside four helpers and 0.23 s without them,
# niced or not, and niced busy processes slowed an nvdisasm by up to 54%: the CPU's time is not what
# they share there; tests/benchmarks/tool_contention.py.)
NICENESS = 10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ktui.worker.ahead")
    parser.add_argument("--arch", default=None)
    args = parser.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {processes.STACK_SIGNAL_ASIDE})  # the worker's mask, inherited
    os.nice(NICENESS)
    from ktui.worker.main import protocol_channel

    channel = protocol_channel()
    processes.watch_parent(int(os.environ.get(processes.PARENT_ENV) or 0))

    def send(obj: dict) -> None:
        channel.write(json.dumps(obj) + "\n")
        channel.flush()

    import torch

    from ktui.worker.dsl.registry import for_user_code

    tier = for_user_code(args.arch)  # as the worker's: the same Triton cache keys
    if tier.is_gpu:
        torch.cuda.init()
    warm_up(tier)
    from ktui.protocol.job import Job
    from ktui.worker.timing import gpu_lock

    send({"type": "ready", "pid": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        started = time.perf_counter()
        # never beside a timed section
        with gpu_lock.share(gpu_lock.device_key()) if tier.is_gpu else contextlib.nullcontext():
            compiled = compile_shapes(Job.from_json(request["job"]), tier, request["shapes"])
        processes.end_descendants()
        send({"type": "done", "compiled": compiled, "s": round(time.perf_counter() - started, 3)})
    return 0


def warm_up(tier: Any) -> None:
    """Pay a new process's one-time costs before saying ready, as the worker does: the memory fit
    check's fake tensors (1.3 s of a first request, measured) and Triton's first compile."""
    from ktui.worker import memory

    memory.warm_up()
    if tier.is_gpu:
        from ktui.worker.timing.floorkernels import compile_afresh

        try:
            compile_afresh()
        except Exception:  # only a head start: a helper that cannot compile it still serves
            pass


def compile_shapes(job: Any, tier: Any, shapes: list[dict]) -> int:
    """Call ``custom_kernel`` on inputs for each of ``shapes`` with every launch a compile; return
    how many calls completed. Any failure is the worker's to find and report: here it is skipped."""
    from ktui.worker.context import RunContext
    from ktui.worker.modules import job_imports
    from ktui.worker.rungs import precheck

    ctx = RunContext(job=job, tier=tier, emit=lambda event: None)
    completed = 0
    with job_imports(job):
        try:
            precheck.run(ctx)
        except BaseException:  # the worker's own pre-checks say what went wrong
            return 0
        with contextlib.ExitStack() as scope:
            for dsl in ctx.dsls:
                scope.enter_context(dsl.compiling_only(ctx.kernels[dsl.name]))
            for shape in shapes:
                if too_large(ctx, shape):
                    continue  # the worker compiles it itself, without a second copy of its inputs
                try:
                    ctx.custom_kernel(*ctx.generate(shape, ctx.next_seed()))
                    completed += 1
                except BaseException:  # sys.exit and the like included: the worker judges
                    continue
    return completed


def too_large(ctx: Any, shape: dict) -> bool:
    """Whether ``shape``'s inputs and outputs pass ``MAX_SHAPE_BYTES`` (by the fake-tensor estimate), or
    cannot be sized: a helper making a benchmark's gigabytes of inputs would take them from the
    worker's GPU, several helpers at once, for a specialisation the worker builds in a fraction of
    a second anyway."""
    from ktui.worker import memory

    need = memory.estimate(ctx, shape)
    return need is None or need.inputs + need.outputs > MAX_SHAPE_BYTES
