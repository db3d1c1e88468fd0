"""The ladder: which rungs run, in which order, and when one is skipped.

    pre-checks → compile → dumps → run → correctness[shape]… → integrity → dependence → benchmark[shape]…

(Where the problem brings its own judge, GPU MODE's check_implementation, it judges each
correctness call's output beside ktui's metrics: ``judgement.py`` has the rule.)

Each rung runs, catches its own failure and records ok / failed / skipped / suspicious with its
figures; the ladder goes on where that still makes sense: a failed compile skips everything that
needs a kernel, a failed shape does not hide the others, and only a kernel that is correct on
every shape is timed (a fast wrong kernel is worth nothing). To add a rung, write its module
with a ``run(ctx, …) -> Outcome`` and call it from ``climb`` below.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ktui.loop import integrity
from ktui.loop.context import RunContext
from ktui.loop.dsl.triton_kernels import as_jit_function, is_triton_kernel
from ktui.loop.errors import RungFailure, RungSkipped, error_info
from ktui.loop.outcome import InputGenerationError, Outcome, shape_label
from ktui.loop.rungs import bench, compile, correctness, dependence, dumps, precheck, run
from ktui.loop.rungs.bench import NO_GPU_TIMING
from ktui.measure.masks import with_hint
from ktui.measure.roofline import DEFAULT_DONE
from ktui.measure.stats import Interval, geometric_mean, geometric_mean_interval
from ktui.protocol.events import (
    COMPILED,
    FAILED,
    OK,
    PASSED,
    SKIPPED,
    SUSPICIOUS,
    RungFinished,
    RungStarted,
    clean_figures,
    first_failure,
)

CUTE_NEEDS_GPU = "CuTeDSL kernels need a GPU to run (CPU tier: compiled ahead of time only)"


class Ladder:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.results: list[RungFinished] = []

    # -- one rung ------------------------------------------------------------------------------
    def step(self, name: str, fn: Callable[..., Outcome], *args: Any) -> RungFinished:
        ctx = self.ctx
        ctx.emit(RungStarted(ctx.job.run_id, rung=name, timeout_s=ctx.job.options.timeout_for(name)))
        started = time.perf_counter()
        ctx.phases.take()  # nothing before this rung counts as its own
        try:
            outcome = fn(ctx, *args)
            status, figures, message, error = outcome.status, outcome.figures, outcome.message, None
        except RungSkipped as skip:
            status, figures, message, error = SKIPPED, {}, str(skip), None
        except RungFailure as failure:
            status, figures, message, error = failure.status, failure.figures, failure.message, failure.error
        except InputGenerationError as exc:
            info = error_info(exc.__cause__ or exc, ctx.user_files)
            status, figures, message, error = FAILED, {}, str(exc), info
        except Exception as exc:
            info = error_info(exc, ctx.user_files, _jit_functions(ctx))
            status, figures, message, error = FAILED, {}, f"{info.type}: {info.message}", info
        except SystemExit as exc:
            status, figures, message, error = FAILED, {}, f"user code called sys.exit({exc.code})", None
        if status == FAILED:
            message = with_hint(message, name, ctx.tier.name, self._unmasked_loads(), _relative(ctx.job))
        result = RungFinished(
            ctx.job.run_id,
            rung=name,
            status=status,
            figures=clean_figures(figures),
            message=message,
            error=error,
            duration_s=round(time.perf_counter() - started, 4),
            phases_s=ctx.phases.take(),
        )
        self.results.append(result)
        ctx.emit(result)
        return result

    def _unmasked_loads(self) -> list[str]:
        compiled = next((r for r in self.results if r.rung == "compile"), None)
        return list(compiled.figures.get("unmasked_loads") or []) if compiled is not None else []

    def skip(self, name: str, reason: str) -> None:
        result = RungFinished(self.ctx.job.run_id, rung=name, status=SKIPPED, message=reason)
        self.results.append(result)
        self.ctx.emit(result)

    # -- the order -----------------------------------------------------------------------------
    def climb(self) -> list[RungFinished]:
        ctx = self.ctx
        pre = self.step("pre-checks", precheck.run)
        if not pre.ok:
            for name in ["compile", "dumps", "run", "correctness", "integrity", "dependence", "benchmark"]:
                self.skip(name, _because(pre))
            return self.results
        tests = unique_names([f"correctness[{shape_label(s)}]" for s in ctx.tests])
        probes = ["integrity", "dependence"]
        benches = unique_names([f"benchmark[{shape_label(s)}]" for s in ctx.benchmarks])

        built = self.step("compile", compile.run)
        # The dumps are written while the checks run (``dumps.start``): off the save → verdict
        # path, and their rung finished before any benchmark is timed.
        dumping = dumps.start(ctx) if ctx.compiled else None
        bench_skip = self._checks(built, tests, probes)
        if dumping is not None:
            self.step("dumps", dumping.finish)
        else:
            self.skip("dumps", "nothing was compiled")
        if bench_skip:
            self._skip_all(benches, bench_skip)
        else:
            for name, shape in zip(benches, ctx.benchmarks):
                self.step(name, bench.run, shape)
        return self.results

    def _checks(self, built: RungFinished, tests: list[str], probes: list[str]) -> str:
        """The smoke run, the correctness rungs and the probes; why no benchmark may run ("" if one may)."""
        ctx = self.ctx
        if not built.ok:
            self._skip_all(["run", *tests, *probes], _because(built))
            return _because(built)
        if compile_only(ctx):
            self._skip_all(["run", *tests, *probes], CUTE_NEEDS_GPU)
            return NO_GPU_TIMING
        smoke = self.step("run", run.run)
        if not smoke.ok:
            self._skip_all([*tests, *probes], _because(smoke))
            return _because(smoke)
        checks = [self.step(name, correctness.run, shape) for name, shape in zip(tests, ctx.tests)]
        if all(c.ok for c in checks):
            checks.append(self.step("integrity", integrity.run))
            checks.append(self.step("dependence", dependence.run))
        else:
            self._skip_all(probes, "not correct on every test shape")
        if not ctx.job.options.benchmark:
            return "benchmarks disabled (--no-bench)"
        if not ctx.tier.is_gpu:
            return NO_GPU_TIMING
        if not all(c.ok for c in checks):
            return "not correct on every test shape: a fast wrong kernel is worth nothing"
        return ""

    def _skip_all(self, names: list[str], reason: str) -> None:
        for name in names:
            self.skip(name, reason)


def unique_names(names: list[str]) -> list[str]:
    """A rung's name is its key in a run — in the history, the baselines a benchmark is compared
    with, the dashboard's rows — so a shape listed twice is ``correctness[size=8]#2``."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _relative(job) -> str:
    """The kernel file as the user names it in a command: relative to the workspace root."""
    path = Path(job.kernel_path)
    return str(path.relative_to(job.root)) if path.is_relative_to(job.root) else str(path)


def _because(result: RungFinished) -> str:
    """Why later rungs are skipped: ``compile failed``, ``compile was suspicious``."""
    if result.status == FAILED:
        return f"{result.rung} failed"
    return f"{result.rung} was {result.status.replace('_', ' ')}"


def verdict(results: list[RungFinished], only_compiled: bool = False) -> str:
    """The run's word. ``only_compiled`` (a CuTeDSL kernel on the CPU tier): nothing ran, so a clean
    ladder is ``compiled``, never ``passed``."""
    statuses = {r.status for r in results}
    if SUSPICIOUS in statuses:
        return SUSPICIOUS
    if statuses - {OK, SKIPPED}:
        return FAILED
    return COMPILED if only_compiled else PASSED


def compile_only(ctx: RunContext) -> bool:
    """Whether this run could only compile: CuTeDSL needs a GPU to run (see ``_checks``)."""
    return ctx.has_cute and not ctx.tier.is_gpu


def _jit_functions(ctx: RunContext) -> list:
    """The module's Triton functions as JITFunctions, to place a compilation error in the file."""

    modules = {id(m): m for m in (ctx.compilable, ctx.kernel) if m is not None}.values()
    return [as_jit_function(obj) for m in modules for obj in vars(m).values() if is_triton_kernel(obj)]


def summarize(results: list[RungFinished], roofline_done: float = DEFAULT_DONE) -> dict[str, Any]:
    """The figures a one-line summary needs: counts, correctness, speedup, roofline, first failure.

    Across benchmark shapes: geometric means (of speedups, of fractions of roofline, of kernel
    times), the speedup's interval from the shapes' intervals, and ``at_roofline`` when the mean
    fraction reaches ``roofline_done`` and no shape was impossible.
    """
    counts = {s: sum(1 for r in results if r.status == s) for s in {r.status for r in results}}
    checks = [r for r in results if r.rung.startswith("correctness[")]
    benches = [r for r in results if r.rung.startswith("benchmark[")]
    timed = [r for r in benches if r.ok]
    summary: dict[str, Any] = {"rungs": len(results), "counts": counts}
    ran = [c for c in checks if c.status != SKIPPED]
    if ran:
        summary["correct"] = [sum(1 for c in ran if c.ok), len(checks)]
    elif checks:
        summary["unchecked"] = checks[0].message
    speedups = _numbers(timed, "speedup")
    if speedups:
        summary["speedup"] = geomean(speedups)
        intervals = [_interval(r.figures) for r in timed]
        if all(intervals):
            summary["speedup_ci"] = geometric_mean_interval(intervals).as_list()
    kernel_us = _numbers(timed, "kernel_us")
    if kernel_us:
        summary["kernel_us"] = geomean(kernel_us)
    impossible = [r.rung for r in benches if r.figures.get("impossible") is True]
    if impossible:
        summary["impossible"] = impossible
    fractions = _numbers(timed, "roofline")
    if fractions:
        summary["roofline"] = geomean(fractions)
        summary["at_roofline"] = summary["roofline"] >= roofline_done and not impossible
        summary["roofline_done"] = roofline_done
        summary["ceiling"] = sorted({str(r.figures["ceiling"]) for r in timed if r.figures.get("ceiling")})
    if any(r.figures.get("throttled") is True for r in benches):
        summary["throttled"] = True
    for r in results:
        if r.rung == "compile" and "compile_s" in r.figures:
            summary["compile_s"] = r.figures["compile_s"]
    bad = next((r for r in results if r.status not in (OK, SKIPPED)), None)
    if bad is not None:
        summary["first_failure"] = first_failure(bad.rung, bad.status, bad.message)
    return summary


def _numbers(results: list[RungFinished], key: str) -> list[float]:
    values = [r.figures.get(key) for r in results]
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]


def _interval(figures: dict[str, Any]) -> Interval | None:
    ci, point = figures.get("speedup_ci"), figures.get("speedup")
    if not isinstance(ci, list) or len(ci) != 2 or not isinstance(point, (int, float)):
        return None
    if not all(isinstance(v, (int, float)) and v > 0 for v in ci):
        return None
    return Interval(float(point), float(ci[0]), float(ci[1]))


def geomean(values: list[float]) -> float:
    """Geometric mean of the positive values; 0.0 when there are none."""
    return geometric_mean(values) if any(v > 0 for v in values) else 0.0
