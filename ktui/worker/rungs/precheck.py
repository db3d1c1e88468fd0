"""Rung ``pre-checks``: the kernel imports, has its entry point (``custom_kernel``, or
``ModelNew`` for KernelBench), its reference is usable in its format, and it contains at least one
kernel of a DSL the worker knows (``ktui.protocol.dsls``, ``dsl/registry.py``).

On the CPU tier a module with Triton kernels is imported twice: once with Triton's interpreter on
(what runs on CPU tensors) and once without (real ``JITFunction``s, which the compile rung builds
for the target architecture): ``Dsl.importing`` and ``Dsl.needs_compilable_import``.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from types import ModuleType

from ktui.protocol.job import Job
from ktui.worker import formats, integrity, memory
from ktui.worker.context import RunContext
from ktui.worker.dsl.registry import DSLS
from ktui.worker.errors import RungFailure
from ktui.worker.formats.base import misspelt_note
from ktui.worker.modules import load_module, load_reference
from ktui.worker.outcome import Outcome
from ktui.worker.seeds import choice


def run(ctx: RunContext) -> Outcome:
    job = ctx.job
    tag = f"{job.run_id[:8]}_{Path(job.kernel_path).stem}"
    if not job.reference_path:
        raise RungFailure(job.reference_error or "no reference resolved for this kernel")
    ctx.user_files = {job.kernel_path, job.reference_path, *job.problem.get("modules", {}).values(),
                      *job.reference_modules.values()}

    fmt = formats.spec(job.format)
    if job.reference_files and job.reference_path not in job.reference_files:
        raise RungFailure(f"the run carries no snapshot of its reference {Path(job.reference_path).name}")
    # The reference first, from the text the parent hashed: nothing the kernel's module does can
    # change what judges it (a rewritten file on disk is not read; a patched module is restored).
    ctx.reference = load_reference(job, f"ktui_user_ref_{tag}")
    ctx.reference_modules = reference_modules(ctx)
    watch = integrity.NamespaceGuard(ctx.reference_modules)
    try:
        ctx.kernel = import_kernel(job, f"ktui_user_{tag}", interpreted=not ctx.tier.is_gpu)
    except ModuleNotFoundError as exc:
        raise missing_dsl(exc, Path(job.kernel_path).name) from exc
    tampered = ctx.guard.verify() if ctx.guard is not None else []
    if tampered:
        raise RungFailure(
            f"importing {Path(job.kernel_path).name} patched the harness: {', '.join(tampered[:4])} (restored)",
            status="suspicious",
        )
    reference_intact(watch, job)
    copied = integrity.reference_imports(job.source, job.reference_path)
    if copied:
        raise RungFailure(
            f"{Path(job.kernel_path).name} imports its own reference ({'; '.join(copied)}): "
            "a kernel must compute its answer, not borrow the trusted one",
            status="suspicious",
        )
    if not callable(getattr(ctx.kernel, fmt.entry, None)):
        raise RungFailure(f"{Path(job.kernel_path).name} defines no {fmt.entry_text}"
                          f"{misspelt_note(ctx.kernel, [fmt.entry])}")

    ctx.problem = formats.load_problem(job, ctx.tier, ctx.kernel, ctx.reference, ctx.next_seed)
    bad = [t for t in [*ctx.tests, *ctx.benchmarks] if not isinstance(t, dict)]
    if bad:
        raise RungFailure(f"reference {Path(job.reference_path).name}: shapes must be dicts, got {bad[0]!r}")

    ctx.kernels = {dsl.name: dsl.find(ctx.kernel) for dsl in DSLS}
    if not ctx.dsls:
        known = [f"{dsl.title} ({dsl.marks})" for dsl in DSLS]
        raise RungFailure(
            f"{Path(job.kernel_path).name} contains no {', '.join(known[:-1])} or {known[-1]} "
            "kernel: ktui verifies GPU kernels, not library calls"
        )
    for dsl in ctx.dsls:
        dsl.prepare()
    ctx.compilable = ctx.kernel
    if not ctx.tier.is_gpu and any(dsl.needs_compilable_import for dsl in ctx.dsls):
        watch = integrity.NamespaceGuard(ctx.reference_modules)
        ctx.compilable = import_kernel(job, f"ktui_user_aot_{tag}", interpreted=False)
        reference_intact(watch, job)

    fitted = memory.require_fit(ctx)  # before anything heavy: compile's traced call is the first to allocate
    seeds = choice.choose(ctx)  # before any input is made for a check: the fresh seeds keep the declared inputs' kind
    return Outcome(
        figures={
            "format": job.format,
            **ctx.problem.figures,
            **{dsl.figure: list(ctx.kernels[dsl.name]) for dsl in DSLS},
            # the DSLs this tier only compiles: the header says so before compile starts
            "compile_only": "/".join(d.title for d in ctx.dsls if not (d.runs_on_cpu or ctx.tier.is_gpu)) or None,
            "tests": len(ctx.tests),
            "benchmarks": len(ctx.benchmarks),
            **memory.sizes_figures(ctx),
            **declared_seeds_figures(ctx),
            **seeds.figures(),
        },
        message="; ".join(filter(None, [_summary(ctx), seeds.declared and f"seeds: {seeds.note()}",
                                        f"memory: {fitted.message}"])),
    )


def import_kernel(job: Job, name: str, interpreted: bool) -> ModuleType:
    """The kernel's module from the text the parent hashed, under what each DSL needs while a module
    body runs (``Dsl.importing``)."""
    with contextlib.ExitStack() as scopes:
        for dsl in DSLS:
            scopes.enter_context(dsl.importing(interpreted))
        return load_module(name, job.kernel_path, job.source)


def reference_intact(watch: integrity.NamespaceGuard, job: Job) -> None:
    """Importing the kernel left its reference's modules as they were (``watch``), else suspicious."""
    patched = watch.verify()
    if patched:
        raise RungFailure(
            f"importing {Path(job.kernel_path).name} patched its reference: {', '.join(patched[:4])} (restored)",
            status="suspicious",
        )


def missing_dsl(exc: ModuleNotFoundError, file: str) -> Exception:
    """A kernel written in a DSL this machine lacks: say what to install, not a traceback."""
    root = (exc.name or "").partition(".")[0]
    dsl = next((d for d in DSLS if d.package == root), None)
    if dsl is None:
        return exc
    return RungFailure(f"{file} is a {dsl.title} kernel, and {dsl.title} is not installed here: {dsl.install}")


def reference_modules(ctx: RunContext) -> dict[str, ModuleType]:
    """The reference module and the workspace modules it imported from the run's snapshot, by name."""
    found = {"reference": ctx.reference}
    for name, module in list(sys.modules.items()):
        if module is not ctx.reference and getattr(module, "__file__", None) in ctx.job.reference_files:
            found[name] = module
    return found


def declared_seeds_figures(ctx: RunContext) -> dict:
    """The problem's own seed of each test (None where it declares none), when it declares any."""
    seeds = ctx.problem.test_seeds
    return {"declared_seeds": seeds} if any(s is not None for s in seeds) else {}


def _summary(ctx: RunContext) -> str:
    parts = [f"{len(ctx.kernels[dsl.name])} {dsl.title} {dsl.noun}" for dsl in ctx.dsls]
    summary = ", ".join(parts) + f"; {len(ctx.tests)} test shape(s), {len(ctx.benchmarks)} benchmark shape(s)"
    if ctx.job.format != formats.NATIVE:
        summary = f"{ctx.job.format}: {summary}"
    return "; ".join([summary, *ctx.problem.notes])

