"""Rung 1, ``pre-checks``: the kernel imports, has ``custom_kernel``, its reference is usable, and it
contains at least one Triton or CuTeDSL kernel.

On the CPU tier the kernel is imported twice: once with Triton's interpreter on (what runs on
CPU tensors) and once without (real ``JITFunction``s, which the compile rung builds for the
target architecture).
"""

from __future__ import annotations

from pathlib import Path

from ktui.loop import cutedsl, integrity
from ktui.loop.context import Outcome, RunContext
from ktui.loop.errors import RungFailure
from ktui.loop.modules import load_module
from ktui.loop.triton_kernels import find_triton_kernels

REQUIRED_IN_REFERENCE = ("generate_input", "ref_kernel", "TESTS")


def run(ctx: RunContext) -> Outcome:
    job = ctx.job
    tag = f"{job.run_id[:8]}_{Path(job.kernel_path).stem}"
    if not job.reference_path:
        raise RungFailure(job.reference_error or "no reference resolved for this kernel")
    ctx.user_files = {job.kernel_path, job.reference_path}

    ctx.kernel = load_module(f"ktui_user_{tag}", job.kernel_path, job.source, interpret=not ctx.tier.is_gpu)
    tampered = ctx.guard.verify() if ctx.guard is not None else []
    if tampered:
        raise RungFailure(
            f"importing {Path(job.kernel_path).name} patched the harness: {', '.join(tampered[:4])} (restored)",
            status="suspicious",
        )
    copied = integrity.reference_imports(job.source, job.reference_path)
    if copied:
        raise RungFailure(
            f"{Path(job.kernel_path).name} imports its own reference ({'; '.join(copied)}): "
            "a kernel must compute its answer, not borrow the trusted one",
            status="suspicious",
        )
    if not callable(getattr(ctx.kernel, "custom_kernel", None)):
        raise RungFailure(f"{Path(job.kernel_path).name} defines no function custom_kernel(*inputs)")

    ctx.reference = load_module(f"ktui_user_ref_{tag}", job.reference_path)
    missing = [name for name in REQUIRED_IN_REFERENCE if not hasattr(ctx.reference, name)]
    if missing:
        raise RungFailure(f"reference {Path(job.reference_path).name} lacks {', '.join(missing)}")
    if not isinstance(ctx.reference.TESTS, (list, tuple)) or not ctx.reference.TESTS:
        raise RungFailure(f"reference {Path(job.reference_path).name}: TESTS must be a non-empty list of shape dicts")
    bad = [t for t in [*ctx.tests, *ctx.benchmarks] if not isinstance(t, dict)]
    if bad:
        raise RungFailure(f"reference {Path(job.reference_path).name}: shapes must be dicts, got {bad[0]!r}")

    ctx.triton_kernels = find_triton_kernels(ctx.kernel)
    ctx.cute_functions = cutedsl.find_cute_functions(ctx.kernel)
    if not ctx.triton_kernels and not ctx.cute_functions:
        raise RungFailure(
            f"{Path(job.kernel_path).name} contains no Triton (@triton.jit) or CuTeDSL (@cute.jit/@cute.kernel) "
            "kernel: ktui verifies GPU kernels, not library calls"
        )
    ctx.compilable = ctx.kernel
    if ctx.triton_kernels and not ctx.tier.is_gpu:
        ctx.compilable = load_module(f"ktui_user_aot_{tag}", job.kernel_path, job.source, interpret=False)

    return Outcome(
        figures={
            "triton_kernels": sorted(ctx.triton_kernels),
            "cute_functions": [name for name, _ in ctx.cute_functions],
            "tests": len(ctx.tests),
            "benchmarks": len(ctx.benchmarks),
        },
        message=_summary(ctx),
    )


def _summary(ctx: RunContext) -> str:
    parts = []
    if ctx.triton_kernels:
        parts.append(f"{len(ctx.triton_kernels)} Triton kernel(s)")
    if ctx.cute_functions:
        parts.append(f"{len(ctx.cute_functions)} CuTeDSL function(s)")
    return ", ".join(parts) + f"; {len(ctx.tests)} test shape(s), {len(ctx.benchmarks)} benchmark shape(s)"
