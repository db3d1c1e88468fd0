"""The ladder: which rungs run, in which order, and when one is skipped.

    pre-checks → compile → dumps → run → correctness[shape]… → fresh-shapes → integrity → dependence
    → benchmark[shape]…

(Where the problem brings its own judge, GPU MODE's check_implementation, it judges each
correctness call's output beside ktui's metrics: ``judgement.py`` has the rule.)

Each rung runs, catches its own failure and records ok / failed / skipped / suspicious with its
figures; the ladder goes on where that still makes sense: a failed compile skips everything that
needs a kernel, a failed shape does not hide the others, and only a kernel that is correct on
every shape — the declared ones, then the few fresh ones ``fresh-shapes`` derives from them — is
timed (a fast wrong kernel is worth nothing). To add a rung, write its module
with a ``run(ctx, …) -> Outcome``, give it a row in the rung table (``ktui/protocol/rungs.py``),
register it in ``rungs/registry.py`` and call it from ``climb`` below.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from ktui.measure.masks import unmasked_of, with_hint
from ktui.measure.roofline import DEFAULT_DONE
from ktui.measure.stats import Interval, geometric_mean, geometric_mean_interval
from ktui.protocol.events import (
    COMPILED,
    ERROR,
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
from ktui.protocol.rungs import BY_NAME, RUNGS, rung_family
from ktui.worker import memory, stack_request
from ktui.worker.ahead.pool import submit_run
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure, RungSkipped, error_info
from ktui.worker.outcome import Outcome, ReferenceFault, shape_label
from ktui.worker.rungs import fresh
from ktui.worker.rungs.bench import NO_GPU_TIMING
from ktui.worker.rungs.registry import IMPLEMENTATIONS as DO
from ktui.worker.timing import gpu_lock


def needs_gpu(ctx: RunContext) -> str:
    """Why nothing runs on the CPU tier: the module's DSLs that cannot run there."""
    titles = " and ".join(dsl.title for dsl in ctx.dsls if not dsl.runs_on_cpu)
    return f"{titles} kernels need a GPU to run (CPU tier: compiled ahead of time only)"


class Ladder:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.results: list[RungFinished] = []

    # -- one rung ------------------------------------------------------------------------------
    def step(self, name: str, fn: Callable[..., Outcome], *args: Any) -> RungFinished:
        """Run one rung. One that runs kernels on the GPU, other than a benchmark (which takes the GPU
        to itself), waits for another ktui process's timed section first and holds one off while it
        runs (``gpu_lock.share``): before its own time limit starts, so a wait never fails it."""
        if not (self.ctx.tier.is_gpu and BY_NAME[rung_family(name)].shares_gpu):
            return self._step(name, fn, args, {})
        with gpu_lock.share(gpu_lock.device_key()) as turn:
            return self._step(name, fn, args, turn.figures())

    def _step(self, name: str, fn: Callable[..., Outcome], args: tuple, turn: dict[str, Any]) -> RungFinished:
        ctx = self.ctx
        ctx.rung = name
        stack_request.rearm()  # the stack request's handlers, should code of the last rung have taken them
        ctx.emit(RungStarted(ctx.job.run_id, rung=name, timeout_s=ctx.job.options.timeout_for(name)))
        started = time.perf_counter()
        ctx.phases.take()  # nothing before this rung counts as its own
        if ctx.peaks is not None:
            ctx.peaks.start_rung()
        try:
            outcome = fn(ctx, *args)
            status, figures, message, error = outcome.status, outcome.figures, outcome.message, None
        except RungSkipped as skip:
            status, figures, message, error = SKIPPED, {}, str(skip), None
        except RungFailure as failure:
            status, figures, message, error = failure.status, failure.figures, failure.message, failure.error
        except ReferenceFault as exc:  # the reference cannot judge the kernel: not the kernel's failure
            info = error_info(exc.__cause__ or exc, ctx.user_files)
            status, figures, message, error = ERROR, {}, reference_error(exc, info, ctx.job), info
        except Exception as exc:
            info = error_info(exc, ctx.user_files, (ctx.compilable, ctx.kernel))
            status, figures, message, error = FAILED, {}, f"{info.type}: {info.message}", info
        except SystemExit as exc:
            status, figures, message, error = FAILED, {}, f"user code called sys.exit({exc.code})", None
        if status == FAILED:
            message = with_hint(message, name, ctx.tier.name, self._unmasked(), _relative(ctx.job))
        result = RungFinished(
            ctx.job.run_id,
            rung=name,
            status=status,
            figures=clean_figures({**figures, **turn,
                                   **memory.gb_figure("peak_mem_gb", ctx.peaks.end_rung() if ctx.peaks else None)}),
            message=message,
            error=error,
            duration_s=round(time.perf_counter() - started, 4),
            phases_s=ctx.phases.take(),
        )
        self.results.append(result)
        ctx.emit(result)
        return result

    def _unmasked(self) -> dict[str, list[str]]:
        compiled = next((r for r in self.results if r.rung == "compile"), None)
        return unmasked_of(compiled.figures if compiled is not None else {})

    def skip(self, name: str, reason: str) -> None:
        result = RungFinished(self.ctx.job.run_id, rung=name, status=SKIPPED, message=reason)
        self.results.append(result)
        self.ctx.emit(result)

    # -- the order -----------------------------------------------------------------------------
    def climb(self) -> list[RungFinished]:
        ctx = self.ctx
        pre = self.step("pre-checks", DO["pre-checks"])
        if not pre.ok:
            for rung in RUNGS[1:]:
                self.skip(rung.name, _because(pre))
            return self.results
        tests = unique_names([f"correctness[{shape_label(s)}]" for s in ctx.tests])
        probes = [fresh.NAME, "integrity", "dependence"]
        benches = unique_names([f"benchmark[{shape_label(s)}]" for s in ctx.benchmarks])

        fresh.plan(ctx)  # before anything compiles: compile-ahead builds these shapes too
        ctx.ahead_sent = submit_run(ctx)
        built = self.step("compile", DO["compile"])
        # The dumps are written while the checks run (``dumps.start``): off the save → verdict
        # path, and their rung finished before any benchmark is timed.
        dumping = DO["dumps"](ctx) if ctx.compiled else None
        bench_skip = self._checks(built, tests, probes)
        if dumping is not None:
            self.step("dumps", dumping.finish)
        else:
            self.skip("dumps", "nothing was compiled")
        if bench_skip:
            self._skip_all(benches, bench_skip)
        else:
            for name, shape in zip(benches, ctx.benchmarks):
                self.step(name, DO["benchmark"], shape)
        return self.results

    def _checks(self, built: RungFinished, tests: list[str], probes: list[str]) -> str:
        """The smoke run, the correctness rungs and the probes; why no benchmark may run ("" if one may)."""
        ctx = self.ctx
        if not built.ok:
            self._skip_all(["run", *tests, *probes], _because(built))
            return _because(built)
        if compile_only(ctx):
            self._skip_all(["run", *tests, *probes], needs_gpu(ctx))
            return NO_GPU_TIMING
        smoke = self.step("run", DO["run"])
        if not smoke.ok:
            self._skip_all([*tests, *probes], _because(smoke))
            return _because(smoke)
        checks = [self.step(name, DO["correctness"], shape, seed)
                  for name, shape, seed in zip(tests, ctx.tests, ctx.problem.test_seeds)]
        if all(c.ok for c in checks):
            # Whether the answer is right on shapes it was never shown, then how the answer was made.
            unseen = self.step(fresh.NAME, DO[fresh.NAME])
            checks += [unseen] if unseen.status != SKIPPED else []
            checks.append(self.step("integrity", DO["integrity"]))
            checks.append(self.step("dependence", DO["dependence"]))
        else:
            refused = next((c for c in checks if c.status == ERROR), None)
            self._skip_all(probes, _because(refused) if refused else "not correct on every test shape")
        if not ctx.job.options.benchmark:
            return "benchmarks disabled (--no-bench)"
        if not ctx.tier.is_gpu:
            return NO_GPU_TIMING
        bad = next((c for c in checks if not c.ok), None)
        if bad is not None and bad.status == ERROR:
            return _because(bad)
        if bad is not None and bad.rung == fresh.NAME:
            return f"{fresh.WRONG}: a fast wrong kernel is worth nothing"
        if bad is not None:
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


def reference_error(fault: ReferenceFault, info, job) -> str:
    """``reference error: generate_input(seed=1, size=8) raised ValueError: boom, at references/x.py:31``."""
    where = ""
    if info.location is not None:
        file = Path(info.location.file)
        shown = file.relative_to(job.root) if file.is_relative_to(job.root) else file
        where = f", at {shown}:{info.location.line}"
    return f"reference error: {fault}{where}"


def _because(result: RungFinished) -> str:
    """Why later rungs are skipped: ``compile failed``, ``compile was suspicious``, ``the
    reference raised in compile``."""
    if result.status == FAILED:
        return f"{result.rung} failed"
    if result.status == ERROR:
        return f"the reference raised in {result.rung}"
    return f"{result.rung} was {result.status.replace('_', ' ')}"


def verdict(results: list[RungFinished], only_compiled: bool = False) -> str:
    """The run's word. ``only_compiled`` (a CuTeDSL or TileLang kernel on the CPU tier): nothing ran, so a clean
    ladder is ``compiled``, never ``passed``. A rung the reference's own error stopped makes it
    ``error``, whatever else happened: the kernel was not judged."""
    statuses = {r.status for r in results}
    if ERROR in statuses:  # the reference raised: nothing judged the kernel
        return ERROR
    if SUSPICIOUS in statuses:
        return SUSPICIOUS
    if statuses - {OK, SKIPPED}:
        return FAILED
    return COMPILED if only_compiled else PASSED


def compile_only(ctx: RunContext) -> bool:
    """Whether this run could only compile: a DSL of the module cannot run on the CPU tier (see ``_checks``)."""
    return not ctx.tier.is_gpu and any(not dsl.runs_on_cpu for dsl in ctx.dsls)


def summarize(results: list[RungFinished], roofline_done: float = DEFAULT_DONE,
              done_source: str = "default") -> dict[str, Any]:
    """The figures a one-line summary needs: counts, correctness, speedup, roofline, first failure.

    Across benchmark shapes: geometric means of speedups and kernel times, the speedup's interval
    from the shapes' intervals. The roofline is never averaged — a mean mixes a launch-bound
    shape with a memory-bound one and says neither — but kept per shape (``roofline_shapes``:
    fraction of the attainable time and bound), with the worst shape (``roofline_worst``) and
    the stop decision: ``satisfied`` when every benchmark shape was timed, none impossible, and
    each reaches ``roofline_done``; ``short`` names the shapes that do not. A roofline without the
    launch floor makes no decision (``roofline_provisional`` says why). ``calibration_s``: the
    GPU's one-time calibration, measured in this run, apart from its timings.
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
    silent = [c.rung for c in checks if c.ok and c.figures.get("no_signal") is True]
    if silent:  # passed, but proved nothing: every value below the noise floor (metrics.NO_SIGNAL)
        summary["no_signal"] = silent
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
    summary.update(stop_decision(benches, roofline_done, done_source))
    calibrated = _numbers(benches, "calibration_s")
    if calibrated:
        summary["calibration_s"] = round(sum(calibrated), 3)
    if any(r.figures.get("throttled") is True for r in benches):
        summary["throttled"] = True
    for r in results:
        if r.rung == "compile" and "compile_s" in r.figures:
            summary["compile_s"] = r.figures["compile_s"]
    bad = next((r for r in results if r.status not in (OK, SKIPPED)), None)
    if bad is not None:
        summary["first_failure"] = first_failure(bad.rung, bad.status, bad.message)
    return summary


def stop_decision(benches: list[RungFinished], done: float, source: str) -> dict[str, Any]:
    """Per shape its fraction of the attainable time and bound, the worst shape, and whether every
    shape is within ``done`` of its attainable time; {} when no shape has a roofline figure. A
    shape timed without the launch floor (``roofline_provisional``: its GPU not calibrated) leaves
    the decision out, saying why: its fraction is only a lower bound."""
    shapes: dict[str, dict[str, Any]] = {}
    short: list[str] = []
    for r in benches:
        label = bench_shape(r.rung)
        fraction = r.figures.get("roofline")
        if isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and fraction > 0:
            shapes[label] = {"roofline": float(fraction), "bound": r.figures.get("bound")}
        if not r.ok or label not in shapes or shapes[label]["roofline"] < done:
            short.append(label)
    if not shapes:
        return {}
    worst = min(shapes, key=lambda label: shapes[label]["roofline"])
    decision: dict[str, Any] = {"satisfied": not short, "short": short}
    provisional = next((str(r.figures["roofline_provisional"]) for r in benches if r.figures.get("roofline_provisional")), "")
    if provisional:
        decision = {"roofline_provisional": provisional}
    return {"roofline_shapes": shapes, "roofline_worst": {"shape": worst, **shapes[worst]},
            "roofline_done": done, "roofline_done_source": source, **decision,
            "ceiling": sorted({str(r.figures["ceiling"]) for r in benches if r.ok and r.figures.get("ceiling")})}


def bench_shape(rung: str) -> str:
    """``benchmark[size=8]`` → ``size=8``; ``benchmark[size=8]#2`` → ``size=8#2``."""
    label = rung.removeprefix("benchmark[")
    head, _, repeat = label.rpartition("]#")
    return f"{head}#{repeat}" if head else label.removesuffix("]")


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
