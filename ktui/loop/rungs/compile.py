"""Rung 2, ``compile``: build every kernel ``custom_kernel`` launches, for the target architecture.

One traced call of ``custom_kernel`` decides the specialisation, so what is compiled (and dumped)
is what runs where it matters most: the trace uses the first benchmark shape — the one that is
timed and profiled — or the first test shape when the reference has no benchmarks. Triton
launches are recorded; CuTeDSL's ``cute.compile`` calls are captured. On a GPU the traced call
really runs and the kernels it compiled are kept; on the CPU tier the launches are only recorded
(their arguments are all a specialisation needs) and compiled ahead of time for ``--arch``, and
CuTeDSL kernels are compiled but not executed.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from pathlib import Path

from ktui.loop.context import RunContext
from ktui.loop.device import synchronize
from ktui.loop.dsl import cutedsl
from ktui.loop.dsl.triton_kernels import (
    LaunchRecorder,
    artifacts_of,
    as_jit_function,
    compile_launch,
    metadata_of,
    python_function,
)
from ktui.loop.errors import RungFailure, error_info
from ktui.loop.outcome import CompiledFunction, Outcome, shape_label
from ktui.measure.masks import FIGURES, unmasked_lines


def run(ctx: RunContext) -> Outcome:
    started = time.perf_counter()
    recorder = LaunchRecorder(ctx.triton_kernels)
    capture = cutedsl.CuteCapture(execute=ctx.tier.is_gpu) if ctx.has_cute else contextlib.nullcontext()
    shape = (ctx.benchmarks or ctx.tests)[0]
    inputs = ctx.generate(shape, ctx.next_seed())

    trace_error: BaseException | None = None
    with recorder.recording(execute=ctx.tier.is_gpu), capture:
        try:
            with ctx.reference_kept("custom_kernel"):
                ctx.custom_kernel(*inputs)
                synchronize(ctx.tier)
        except cutedsl.ExecutionSkipped:
            pass  # CPU tier: the CuTeDSL kernel compiled; running it needs a GPU
        except RungFailure:
            raise  # it patched its reference: the trace is not what failed
        except Exception as exc:
            if _is_compile_error(exc):
                raise
            trace_error = exc
    trace_s = time.perf_counter() - started
    tampered = ctx.guard.verify() if ctx.guard is not None else []
    if tampered:
        raise RungFailure(f"custom_kernel patched the harness: {', '.join(tampered[:4])} (restored)", status="suspicious")

    compiled: list[CompiledFunction] = []
    for launch in recorder.distinct():
        kernel = ctx.triton_kernels[launch.kernel]
        ck = launch.compiled
        if ck is None:
            jit = as_jit_function(ctx.compilable.__dict__[launch.kernel])
            ck = compile_launch(jit, launch, ctx.tier.capability)
        fn = python_function(kernel)
        compiled.append(
            CompiledFunction(
                dsl="triton",
                name=ck.metadata.name,
                source_fn=fn.__qualname__,
                artifacts=artifacts_of(ck),
                metadata=metadata_of(ck),
            )
        )
    if ctx.has_cute:
        compiled.extend(capture.compiled)
    ctx.compiled = compiled

    if not compiled:
        if trace_error is not None:
            raise host_failure(trace_error, ctx.user_files)
        raise RungFailure(
            f"custom_kernel launched no Triton or CuTeDSL kernel on {shape_label(shape)}, so nothing was compiled",
            status="suspicious",
        )
    figures = {
        "arch": ctx.tier.arch,
        "traced_shape": shape,
        "functions": [c.name for c in compiled],
        "launches": recorder.count(),
        "compile_s": round(time.perf_counter() - started, 3),
        "trace_s": round(trace_s, 3),
    }
    for op, where in unmasked_accesses(ctx).items():
        if where:  # read back by a failure on the CPU tier (measure/masks.py)
            figures[FIGURES[op]] = where
    names = ", ".join(sorted({c.name for c in compiled}))
    message = f"compiled {names} for {ctx.tier.arch} in {figures['compile_s']:.2f} s, specialised for {shape_label(shape)}"
    if trace_error is not None:
        info = error_info(trace_error, ctx.user_files)
        figures["trace_error"] = info.message.splitlines()[0] if info.message else info.type
        message += f"; the traced call then raised {info.type} (see the run rung)"
    return Outcome(figures=figures, message=message)


def unmasked_accesses(ctx: RunContext) -> dict[str, list[str]]:
    """Per access (``load``, ``store``), ``"add_kernel at oob_read.py:16"`` for each ``tl.load``
    or ``tl.store`` of the module's Triton functions that has no mask: what a CPU-tier failure
    points at, since the interpreter checks no bounds."""
    found: dict[str, list[str]] = {op: [] for op in FIGURES}
    for kernel in ctx.triton_kernels.values():
        fn = python_function(kernel)
        try:
            lines, start = inspect.getsourcelines(fn)
            file = inspect.getsourcefile(fn) or ""
        except (OSError, TypeError):
            continue
        if Path(file).resolve() == (Path(ctx.job.run_dir) / "source.py").resolve():
            file = ctx.job.kernel_path  # the run's snapshot of the kernel file: name the file itself
        for op, numbers in unmasked_lines("".join(lines), start).items():
            found[op] += [f"{fn.__name__} at {Path(file).name}:{line}" for line in numbers]
    return found


def host_failure(exc: BaseException, user_files) -> RungFailure:
    """The traced call failed in the host's Python before any kernel compiled: not a compiler error."""
    info = error_info(exc, user_files)
    where = f" ({Path(info.location.file).name}:{info.location.line})" if info.location else ""
    message = f"custom_kernel raised {info.type} on the host before any kernel compiled{where}: {info.message}"
    return RungFailure(message, error=info)


def _is_compile_error(exc: BaseException) -> bool:
    """Compiler errors (Triton's CompilationError, CuTeDSL's DSL errors) fail this rung."""
    current: BaseException | None = exc
    while current is not None:
        module = type(current).__module__
        if module.startswith("triton") and "Compilation" in type(current).__name__:
            return True
        if cutedsl.is_compile_error(current):
            return True
        current = current.__cause__
    return False
