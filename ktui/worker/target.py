"""The process a profiler or sanitizer runs: the kernel, loaded exactly as the worker loads it.

``ncu`` and ``compute-sanitizer`` wrap a whole process, so ktui hands them this small main instead
of the warm worker. It uses the worker's contract and code — the job's snapshot of the source,
``pre-checks`` to import kernel and reference (``ktui.worker.modules.load_module``), the reference's
``generate_input`` for the inputs — then calls ``custom_kernel``:

- ``check``: load and validate only, report the tier (the parent's pre-flight: "no GPU" is
  answered here, before any tool starts);
- ``ncu``: warm-up calls, then one call inside the NVTX range ``ncu --nvtx-include`` selects, so
  only custom_kernel's own launches are profiled — not the reference, not the input generator;
- ``sanitize``: one call on the first test shape;
- ``sections``: one call under Triton's Proton intra-kernel instrumentation.

It never prints its result: ncu and the sanitizer own stdout. The result is a JSON file.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from ktui.protocol.files import write_atomic
from ktui.protocol.processes import NVTX_RANGE
from ktui.protocol.statedir import runs_root
from ktui.worker.confine import confine, readable_from_env, writable_from_env

MODES = ("check", "ncu", "sanitize", "sections")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ktui.worker.target")
    parser.add_argument("--job", required=True, type=Path)
    parser.add_argument("--result", required=True, type=Path)
    parser.add_argument("--mode", choices=MODES, required=True)
    parser.add_argument("--shape", type=int, default=0, help="index into BENCHMARKS (TESTS for sanitize)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="sections: where Proton writes (no suffix)")
    parser.add_argument("--proton", action="store_true", help="check: also report Proton support")
    parser.add_argument("--tests", action="store_true", help="check: index into TESTS, as sanitize does")
    args = parser.parse_args(argv)
    # Before any user code and any thread: only the result, Proton's output and the run folders
    # may be written, only the job's workspace read (``ktui.worker.confine``); the temp folder lives
    # in the result's private folder. Under ncu or compute-sanitizer the network and /dev/shm stay
    # open: how the tool talks to the process it wraps is the tool's.
    tool = {"ncu": "Nsight Compute", "sanitize": "compute-sanitizer"}
    confinement = confine(_writable(args), _readable(args), tmp_inside=args.result.parent,
                          wrapped_by=tool.get(args.mode, ""))
    result: dict = {"ok": False, "mode": args.mode, **confinement.to_json()}
    try:
        run(args, result)
    except BaseException as exc:
        result.setdefault("error_kind", "raised")
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    finally:
        write_atomic(args.result, json.dumps(result, default=str))
    return 0 if result.get("ok") else 1


def _job(args: argparse.Namespace) -> dict:
    try:
        job = json.loads(args.job.read_text())
    except (OSError, ValueError):
        return {}  # the job is read again in ``run``, which says what is wrong with it
    return job if isinstance(job, dict) else {}


def _writable(args: argparse.Namespace) -> list[Path]:
    folders = [args.result.parent] + ([args.output.parent] if args.output else [])
    runs = runs_root(_job(args).get("run_dir") or "")
    return folders + ([runs] if runs else []) + writable_from_env()


def _readable(args: argparse.Namespace) -> list[Path]:
    """The job's workspace, and its kernel, reference and modules where they lie outside it; the
    tool's own folder when the parent names it (``READABLE_ENV``)."""
    job = _job(args)
    root = Path(job.get("root") or "/nonexistent")
    named = [job.get("kernel_path"), job.get("reference_path"), *(job.get("reference_modules") or {}).values(),
             *((job.get("problem") or {}).get("modules") or {}).values()]
    outside = [Path(p) for p in named if p and not Path(p).is_relative_to(root)]
    return ([root] if job.get("root") else []) + outside + readable_from_env()


def run(args: argparse.Namespace, result: dict) -> None:
    import torch

    from ktui.protocol.job import Job
    from ktui.worker.context import RunContext
    from ktui.worker.dsl.proton import proton_support
    from ktui.worker.dsl.registry import for_user_code
    from ktui.worker.errors import RungFailure
    from ktui.worker.modules import job_imports
    from ktui.worker.rungs import precheck
    from ktui.worker.timing import gpu_lock

    job = Job.from_json(json.loads(args.job.read_text()))
    tier = for_user_code(job.options.arch, force_cpu=job.options.force_cpu)
    result.update(tier=tier.name, device=tier.device, arch=tier.arch)
    if args.mode == "sections" or args.proton:
        result["proton"] = proton_support()
    if not tier.is_gpu and args.mode != "check":
        result["error_kind"] = "no_gpu"
        result["error"] = "no CUDA GPU visible to the profiled process"
        return

    ctx = RunContext(job=job, tier=tier, emit=lambda event: None)
    with job_imports(job):
        try:
            precheck.run(ctx)
        except RungFailure as exc:
            result["error_kind"] = "load"
            result["error"] = exc.message
            return
        result["kernels"] = [name for dsl in ctx.dsls for name in ctx.kernels[dsl.name]]
        on_tests = args.mode == "sanitize" or args.tests or not ctx.benchmarks
        shapes, kind = (ctx.tests, "tests") if on_tests else (ctx.benchmarks, "benchmarks")
        if not 0 <= args.shape < len(shapes):
            result["error_kind"] = "shape"
            result["error"] = f"no shape {args.shape}: the reference has {len(shapes)} {kind} shape(s) (0–{len(shapes) - 1})"
            return
        shape = shapes[args.shape]
        result.update(shape=shape, shape_set=kind, shape_index=args.shape)
        if args.mode == "check":
            result["ok"] = True
            return
        if args.mode == "sections" and not result["proton"]["supported"]:
            result["error_kind"] = "unsupported"
            result["error"] = result["proton"]["reason"]
            return
        # Never beside another ktui process's timed section: a profiler's replays or a sanitizer's
        # slow launches would be timed as that kernel's work. The profiled call is itself a
        # measurement (ncu's replays, Proton's cycle counts), so it has the GPU to itself: no other
        # ktui work beside it, and no other profiler's replays.
        with gpu_lock.share(gpu_lock.device_key()) as turn:
            _note_turn(result, turn)
            inputs = ctx.generate(shape, args.seed)
            if args.mode == "sanitize":
                ctx.custom_kernel(*inputs)
                torch.cuda.synchronize()
            else:
                if args.mode == "sections":
                    _proton_semantic()
                _warm_up(ctx, inputs, args.warmup)
        if args.mode != "sanitize":
            with gpu_lock.take(gpu_lock.device_key()) as turn:
                _note_turn(result, turn)
                if args.mode == "ncu":
                    _profiled_call(ctx, inputs, result)
                else:
                    _sections_call(ctx, inputs, args.output, result)
    result["ok"] = True


def _note_turn(result: dict, turn) -> None:
    """The GPU turns' figures in the result: their waits added up, the last note kept."""
    figures = turn.figures()
    if "gpu_wait_s" in figures:
        result["gpu_wait_s"] = round(result.get("gpu_wait_s", 0.0) + figures["gpu_wait_s"], 3)
    if "gpu_lock" in figures:
        result["gpu_lock"] = figures["gpu_lock"]


def _warm_up(ctx, inputs, warmup: int) -> None:
    """Calls before the measured one, uninstrumented and outside ncu's range: compilation,
    autotuning and caches stay out of what is measured."""
    import torch

    for _ in range(max(0, warmup)):
        ctx.custom_kernel(*inputs)
    torch.cuda.synchronize()


def _count_launches(ctx, call) -> int:
    """The kernel launches of one call, counted by each DSL's adapter (Triton's and TileLang's are
    launches of one GPU function each)."""
    from ktui.worker.integrity import LaunchCounter

    counter = LaunchCounter({dsl: ctx.kernels[dsl.name] for dsl in ctx.dsls})
    with counter.counting():
        call()
    return counter.count


def _profiled_call(ctx, inputs, result: dict) -> None:
    """Exactly one call inside the NVTX range ncu profiles (after ``_warm_up``)."""
    import torch

    torch.cuda.nvtx.range_push(NVTX_RANGE)
    try:
        if not all(dsl.one_gpu_function_per_launch for dsl in ctx.dsls):  # no count to compare with ncu's
            ctx.custom_kernel(*inputs)
        else:
            result["launches"] = _count_launches(ctx, lambda: ctx.custom_kernel(*inputs))
        torch.cuda.synchronize()
    finally:
        torch.cuda.nvtx.range_pop()


def _proton_semantic() -> None:
    """Triton ≥3.5 instruments only Gluon unless asked (before any call, as the warm-up compiles)."""
    import triton.profiler.language as pl

    if hasattr(pl, "enable_semantic"):
        pl.enable_semantic("triton")


def _sections_call(ctx, inputs, output: Path | None, result: dict) -> None:
    """One call under Proton's instrumentation backend (after ``_warm_up``); its tree lands in
    ``<output>.hatchet``."""
    import torch
    import triton.profiler as proton

    assert output is not None
    proton.start(str(output), backend="instrumentation", data="tree")
    try:
        ctx.custom_kernel(*inputs)  # compiled again, instrumented, and run
        torch.cuda.synchronize()
    finally:
        proton.finalize()
    result["hatchet"] = str(output) + ".hatchet"


if __name__ == "__main__":
    sys.exit(main())
