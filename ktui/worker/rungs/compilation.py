"""Rung ``compile``: build every kernel ``custom_kernel`` launches, for the target architecture.

One traced call of ``custom_kernel`` decides the specialisation, so what is compiled (and dumped)
is what runs where it matters most: the trace uses the first benchmark shape — the one that is
timed and profiled — or the first test shape when the reference has no benchmarks. Each DSL of
the module captures its compiles during that call (``Dsl.capture``). On a GPU the traced call
really runs and the kernels it compiled are kept; on the CPU tier Triton's launches are only
recorded (their arguments are all a specialisation needs) and compiled ahead of time for
``--arch``, and the other DSLs' kernels are compiled but not executed (``LaunchSkipped``). Its
inputs may have been made ahead, between the run before and this one (``ktui.worker.ahead.inputs``);
the rung's phases say how long the inputs took and how long the call.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from ktui.measure.masks import FIGURES
from ktui.worker.ahead.inputs import Made, replay_output
from ktui.worker.context import RunContext
from ktui.worker.dsl.base import LaunchSkipped
from ktui.worker.errors import RungFailure, error_info
from ktui.worker.outcome import CompiledFunction, Outcome, shape_label
from ktui.worker.tier import synchronize


def run(ctx: RunContext) -> Outcome:
    started = time.perf_counter()
    captures = [dsl.capture(ctx) for dsl in ctx.dsls]
    shape = traced_shape(ctx)
    with ctx.phases.timing("inputs"):
        seed, inputs, made = traced_inputs(ctx, shape)
    ctx.traced = shape

    trace_error: BaseException | None = None
    with contextlib.ExitStack() as active, ctx.phases.timing("call"):
        for capture in captures:
            active.enter_context(capture)
        try:
            with ctx.reference_kept("custom_kernel"):
                ctx.custom_kernel(*inputs)
                synchronize(ctx.tier)
        except LaunchSkipped:
            pass  # CPU tier: the kernel compiled; running it needs a GPU
        except RungFailure:
            raise  # it patched its reference: the trace is not what failed
        except Exception as exc:
            if _is_compile_error(ctx, exc):
                raise
            trace_error = exc
    trace_s = time.perf_counter() - started
    tampered = ctx.guard.verify() if ctx.guard is not None else []
    if tampered:
        raise RungFailure(f"custom_kernel patched the harness: {', '.join(tampered[:4])} (restored)", status="suspicious")

    compiled: list[CompiledFunction] = [c for capture in captures for c in capture.compiled()]
    ctx.compiled = compiled

    if not compiled:
        if trace_error is not None:
            raise host_failure(trace_error, ctx.user_files)
        raise RungFailure(
            f"custom_kernel launched no {' or '.join(d.title for d in ctx.dsls)} kernel on {shape_label(shape)}, "
            "so nothing was compiled",
            status="suspicious",
        )
    figures = {
        "arch": ctx.tier.arch,
        "traced_shape": shape,
        "seed": seed,
        "functions": [c.name for c in compiled],
        "launches": sum(capture.launches for capture in captures),
        "compile_s": round(time.perf_counter() - started, 3),
        "trace_s": round(trace_s, 3),
    }
    if made is not None:  # the seconds it took, between the runs
        figures["inputs_made_ahead_s"] = made.seconds
    if ctx.ahead_sent:  # the other shapes, handed to the compile-ahead helpers (``ktui.worker.ahead``)
        figures["compiling_ahead"] = ctx.ahead_sent
    for op, where in unmasked_accesses(ctx).items():
        if where:  # read back by a failure on the CPU tier (measure/masks.py)
            figures[FIGURES[op]] = where
    reused = sorted({c.name for c in compiled if c.metadata.get("reused")})
    if reused:  # its binary came from ktui's build cache: the same generated code was built before
        figures["reused"] = reused
    names = ", ".join(sorted({c.name for c in compiled}))
    message = f"compiled {names} for {ctx.tier.arch} in {figures['compile_s']:.2f} s, specialised for {shape_label(shape)}"
    if reused:
        message += f" ({', '.join(reused)}: the same code was built before, its binary reused)"
    if trace_error is not None:
        info = error_info(trace_error, ctx.user_files)
        figures["trace_error"] = info.message.splitlines()[0] if info.message else info.type
        message += f"; the traced call then raised {info.type} (see the run rung)"
    return Outcome(figures=figures, message=message)


def traced_inputs(ctx: RunContext, shape: dict) -> tuple[int, tuple, Made | None]:
    """The traced call's seed and inputs, and what the worker made ahead for them, between this run
    and the one before it (``ktui.worker.ahead.inputs``), if it did."""
    made = ctx.inputs_ahead.take(ctx, shape) if ctx.inputs_ahead is not None else None
    if made is None:
        seed = ctx.next_seed()
        return seed, ctx.generate(shape, seed), None
    replay_output(made)
    return ctx.use_seed(made.seed), ctx.placed(made.data, shape, made.seed), made


def traced_shape(ctx: RunContext) -> dict:
    """The shape of the traced call: the first benchmark shape (the one timed and profiled), else the first test."""
    return (ctx.benchmarks or ctx.tests)[0]


def unmasked_accesses(ctx: RunContext) -> dict[str, list[str]]:
    """Per access (``load``, ``store``), where the module's kernels read or write without a mask:
    what a CPU-tier failure points at (the DSLs that say, ``Dsl.unmasked``)."""
    found: dict[str, list[str]] = {}
    snapshot = Path(ctx.job.run_dir) / "source.py"
    for dsl in ctx.dsls:
        for op, where in dsl.unmasked(ctx.kernels[dsl.name], snapshot, ctx.job.kernel_path).items():
            found.setdefault(op, []).extend(where)
    return found


def host_failure(exc: BaseException, user_files) -> RungFailure:
    """The traced call failed in the host's Python before any kernel compiled: not a compiler error."""
    info = error_info(exc, user_files)
    where = f" ({Path(info.location.file).name}:{info.location.line})" if info.location else ""
    message = f"custom_kernel raised {info.type} on the host before any kernel compiled{where}: {info.message}"
    return RungFailure(message, error=info)


def _is_compile_error(ctx: RunContext, exc: BaseException) -> bool:
    """A DSL's compiler refusing the kernel fails this rung (placed at the user's line by ``error_info``)."""
    return any(dsl.is_compile_error(exc) for dsl in ctx.dsls)
