"""Rung ``benchmark[<shape>]``: kernel and reference timed side by side on the GPU.

The kernel and the reference are sampled in interleaved rounds by ``ktui.worker.timing.sampler`` (cold L2,
hidden launches, rotating input sets, warm-up by time) until ``ktui.measure.stats.StoppingRule`` is
satisfied; the speedup is the ratio of their medians with a paired-bootstrap interval; the
roofline (``ktui.measure.roofline``) turns the kernel's median into a fraction of the time the device
allows (its launch floor, bytes and FLOPs), naming the bound, using the device's calibration where it
has one and the datasheet otherwise. A kernel faster than the datasheet floor is ``suspicious``
(impossible), never celebrated.

The first benchmark on a GPU kind with no calibration has one measured (``device_calibration``): once
for every workspace of the user, in an exclusive turn on the GPU, before the rung allocates its inputs,
by the measuring process the worker's parent starts beside it (the worker may not write the user's
calibrations: ``ktui.worker.parent``), its progress told as the rung's notes; its time is the rung's
``calibration`` phase and ``calibration_s`` figure, apart from the timing's. A roofline without a
launch floor is provisional (``roofline_provisional``): the summary then makes no stop decision.

Comparing with the kernel's earlier versions happens in the process that owns the history
(``ktui.dispatch.compare``), which adds the ``label`` figures to these.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import torch

from ktui.measure import roofline as rl
from ktui.measure import stats
from ktui.measure.calibrate import Obtained
from ktui.measure.datasheets import lookup
from ktui.protocol.events import OK, SUSPICIOUS, RungStarted
from ktui.protocol.job import BenchSettings
from ktui.worker import integrity, memory
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure, RungSkipped
from ktui.worker.outcome import Outcome
from ktui.worker.tier import tensors_in
from ktui.worker.timing import bootstrap, gpu_lock
from ktui.worker.timing.calibrate import for_benchmark
from ktui.worker.timing.sampler import CallTiming, Flush, Measurement, Sampler, capture_graph, flush_bytes, l2_bytes

# Input sets may use at most this share of the free device memory (the rest is for outputs,
# the reference's temporaries and the flush buffer).
INPUT_MEMORY_SHARE = 0.25
# A benchmark may hold at most this many times the problem's own footprint (inputs, the
# reference's output and the candidate's) at its peak: past SMALL_FOOTPRINT that, not the free
# memory, bounds how many input sets rotate (each set costs its inputs and its expected output).
MEMORY_RATIO = 3.0
SMALL_FOOTPRINT = 64 * 2**20  # below it a benchmark keeps every input set asked for: memory is not the concern
# One timed output in this many is compared with the reference (all of them with --strict).
RECHECK_EVERY = 8
NO_GPU_TIMING = "no GPU: timing needs CUDA (CPU tier)"
# While the GPU is being calibrated each step's note restarts the rung's time limit with this one
# (a step is a bandwidth pattern, a launch-floor size, a matmul, or the wait for another process's
# calibration); the rung's own limit counts again from the calibration's end.
CALIBRATION_STEP_S = 300.0

_process: dict[str, Any] = {}  # per-worker state: the clock monitor


def run(ctx: RunContext, shape: dict) -> Outcome:
    if not ctx.tier.is_gpu:
        raise RungSkipped(NO_GPU_TIMING)
    settings = ctx.job.options.bench_settings()
    done, _ = roofline_done(ctx)  # a bad ROOFLINE_DONE fails here, before any timing
    calibration = device_calibration(ctx)  # before the inputs take their share of the memory
    sets = input_sets(ctx, shape, settings)
    rule = stats.StoppingRule(settings.rse_target, settings.min_samples, settings.time_s, settings.max_samples)
    check = integrity.TimedOutputCheck(ctx, sets, every=1 if ctx.job.options.strict else RECHECK_EVERY,
                                       fresh=lambda: ctx.generate(shape, ctx.next_seed()))
    peaks = _peak(ctx, "peak_sets_gb")  # the input sets and their expected outputs
    with ctx.phases.timing("gpu wait"):  # another ktui process timing on this GPU goes first
        turn = gpu_lock.take(gpu_lock.device_key())
    with turn:
        suspicion, figures = _timed(ctx, sets, rule, settings, check)
    figures.update(peaks, **turn.figures(), **calibration.figures())
    if suspicion is not None:
        return Outcome(figures=figures, status=SUSPICIOUS, message=suspicion)
    return _judged(ctx, shape, sets, check, figures, settings, done, calibration)


def device_calibration(ctx: RunContext) -> Obtained:
    """This device's calibration (``ktui.worker.timing.calibrate.for_benchmark``): found, or measured
    now by the parent's measuring process and kept for every workspace, each step told as a note of
    this rung (a new time limit each); its memory is that process's, not the run's. Looked for once
    a run: the other shapes use what the first found (a failed measurement is tried again by the
    next run, not the next shape)."""
    if ctx.calibration is not None:
        return replace(ctx.calibration, measured_s=None, waited_s=0.0)  # its cost was the first shape's
    told: list[str] = []

    def progress(text: str) -> None:
        told.append(text)
        ctx.emit(RungStarted(ctx.job.run_id, rung=ctx.rung, timeout_s=CALIBRATION_STEP_S,
                             note=f"calibrating the GPU: {text}"))

    def ask(told: Callable[[str], None]) -> Obtained:
        if ctx.tier.is_gpu:
            torch.cuda.empty_cache()  # what this process keeps cached, the measuring process may need
        return ctx.parent.calibration(told)

    with ctx.phases.timing("calibration"):
        got = for_benchmark(Path(ctx.job.root), progress, ask if ctx.parent is not None else None)
    if told:  # the rung's own time limit counts from here
        ctx.emit(RungStarted(ctx.job.run_id, rung=ctx.rung, timeout_s=ctx.job.options.timeout_for(ctx.rung)))
    ctx.calibration = got
    return got


def _judged(ctx: RunContext, shape: dict, sets: list[tuple], check: integrity.TimedOutputCheck,
            figures: dict[str, Any], settings: BenchSettings, done: float, calibration: Obtained) -> Outcome:
    """The timed figures against the device's roofline: the rung's outcome."""
    model, dtype, notes = roofline_model(ctx, shape, sets[0])
    figures.update(notes)
    ceiling, limit, ceiling_note = ceilings(ctx.tier.device, calibration)
    if ceiling_note:
        figures["ceiling_note"] = ceiling_note
    if dtype:
        figures["dtype"] = dtype
    share = read_share(sets[0], check.expected[0])
    if share is not None:
        figures["read_share"] = share
    ceiling = ceiling.for_reads(share) if ceiling is not None else None
    roof = rl.evaluate(figures["kernel_us"] * 1e-6, model.get("bytes"), model.get("flops"), dtype, ceiling, limit,
                       done=done, check_impossible=not settings.hot_cache)
    figures.update(roof.figures())
    if roof.fraction is not None and roof.launch_floor_s is None:
        figures["roofline_provisional"] = calibration.without_launch_floor()
    status = SUSPICIOUS if roof.impossible else OK
    return Outcome(figures=figures, message=message(figures, roof), status=status)


def _timed(ctx: RunContext, sets: list[tuple], rule: stats.StoppingRule, settings: BenchSettings,
           check: integrity.TimedOutputCheck) -> tuple[str | None, dict[str, Any]]:
    """Everything that reads the clock, done while this process has the GPU to itself
    (``ktui.worker.timing.gpu_lock``): why the timing is suspicious (None when it is not), and the figures."""
    sampler = Sampler(Flush("hot" if settings.hot_cache else settings.flush), _clock_monitor(), inspect=check.inspect)

    def kernel(i: int) -> Any:
        return ctx.custom_kernel(*sets[i % len(sets)])

    def reference(i: int) -> Any:
        return ctx.ref_kernel(*sets[i % len(sets)])

    measured = sampler.measure([kernel, reference], rule, settings.warmup_s)
    figures = timing_figures(measured, settings)
    figures["input_sets"] = len(sets)
    figures.update(_peak(ctx, "peak_timed_gb"))  # the timed calls, with their checks
    figures["rechecked"] = check.checked
    if check.failure is not None:
        return f"right when checked, wrong when timed — {check.failure}", {**figures, **check.failure_figures}
    overwritten = check.overwritten()
    if overwritten is not None:
        return overwritten, figures
    escape = integrity.timer_escape(lambda s: ctx.custom_kernel(*s), sets, figures["kernel_us"], figures["kernel_host_us"])
    figures["wall_us"] = escape["wall_us"]
    if escape["escaped"]:
        return (f"work escapes the timer: {escape['wall_us']:.1f} µs per call with the device synchronised, "
                f"{figures['kernel_us']:.1f} µs by CUDA events "
                "(another stream, a thread, deferred work, or another program on this GPU)"), figures
    if settings.cuda_graph:
        figures.update(graph_figures(ctx, sets, sampler, rule, settings))
        figures.update(_peak(ctx, "peak_graph_gb"))
    return None, figures


def _peak(ctx: RunContext, name: str) -> dict[str, float]:
    """The memory high-water mark of the benchmark's part that just ended, as a figure."""
    return memory.gb_figure(name, ctx.peaks.split()) if ctx.peaks is not None else {}


def roofline_done(ctx: RunContext) -> tuple[float, str]:
    """The fraction of its attainable time each shape must reach (every shape: "satisfied"), and
    where it was set: ``--roofline-done`` where given, else the reference's ``ROOFLINE_DONE``
    (a problem whose small shapes cannot get closer), else 0.9."""
    given = ctx.job.options.bench.get("roofline_done")
    if given is not None:
        return float(given), "--roofline-done"
    value = getattr(ctx.reference, "ROOFLINE_DONE", None) if ctx.reference is not None else None
    if value is None:
        return rl.DEFAULT_DONE, "default"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1.5:
        raise RungFailure(f"the reference's ROOFLINE_DONE must be a fraction of the attainable time in (0, 1.5], "
                          f"e.g. 0.85, got {value!r}")
    return float(value), "the reference's ROOFLINE_DONE"


def input_sets(ctx: RunContext, shape: dict, settings: BenchSettings) -> list[tuple]:
    """Fresh inputs per set (new seeds); as many sets as asked that fit in memory; one when hot."""
    first = ctx.generate(shape, ctx.next_seed())
    wanted = 1 if settings.hot_cache else settings.input_sets
    size = sum(t.numel() * t.element_size() for t in tensors_in(first))
    free, _ = torch.cuda.mem_get_info()
    fit = int(INPUT_MEMORY_SHARE * free // size) if size else wanted
    flush = 0 if settings.hot_cache else flush_bytes(l2_bytes()[0])  # the sampler's L2 flush buffer
    count = min(wanted, fit, sets_within_ratio(memory.estimate(ctx, shape), wanted, flush))
    return [first] + [ctx.generate(shape, ctx.next_seed()) for _ in range(max(0, count - 1))]


def sets_within_ratio(need: memory.Need | None, wanted: int, fixed: int = 0) -> int:
    """How many input sets keep a benchmark's peak within ``MEMORY_RATIO`` × the footprint.

    While timed calls are checked, the benchmark holds every set's inputs and expected output,
    plus up to one call's worth of the problem (the candidate's output, a private copy of the
    inputs where the problem brings its own judge), the metrics' workspace and ``fixed`` (the L2
    flush buffer): ``sets × (in + out) + footprint + workspace + fixed``. Never fewer than two
    when two were asked for (rotation is what tells a result cached by pointer from a computed
    one); under ``SMALL_FOOTPRINT`` (or with no estimate) as many as asked.
    """
    if need is None:
        return wanted
    footprint = need.inputs + memory.OUTPUT_COPIES * need.outputs
    per_set = need.inputs + need.outputs
    if footprint < SMALL_FOOTPRINT or per_set <= 0:
        return wanted
    room = (MEMORY_RATIO - 1) * footprint - need.workspace - fixed
    return max(min(2, wanted), min(wanted, int(room // per_set)))


def _summary_figures(prefix: str, timing: CallTiming) -> dict[str, Any]:
    s = stats.summarize(timing.samples_ms)
    host = stats.summarize(timing.host_ms)
    out = {
        f"{prefix}_us": s.median * 1e3,
        f"{prefix}_mean_us": s.mean * 1e3,
        f"{prefix}_min_us": s.min * 1e3,
        f"{prefix}_iqr_us": s.iqr * 1e3,
        f"{prefix}_rse": s.rse_median,
        f"{prefix}_host_us": host.median * 1e3,
        f"{prefix}_exposed": timing.exposed_fraction,
        f"{prefix}_retaken": timing.retaken,
    }
    if timing.synchronizes:
        out[f"{prefix}_synchronizes"] = True
    return out


def timing_figures(m: Measurement, settings: BenchSettings) -> dict[str, Any]:
    """Figures of an interleaved kernel/reference measurement (pure: testable with fake samples)."""
    kernel, reference = m.calls
    figures: dict[str, Any] = {**_summary_figures("kernel", kernel), **_summary_figures("ref", reference)}
    speed = bootstrap.ratio_of_medians(reference.samples_ms, kernel.samples_ms, confidence=settings.confidence)
    figures.update(
        speedup=speed.point,
        speedup_ci=speed.as_list(),
        n=len(kernel.samples_ms),
        stop=m.stop,
        elapsed_s=m.elapsed_s,
        warmup_s=m.warmup_s,
        cache="hot" if settings.hot_cache else "cold",
        flush=m.flush,
        pad=m.pad,
        **m.clocks.figures(),
    )
    return figures


def graph_figures(ctx: RunContext, sets: list[tuple], sampler: Sampler, rule: stats.StoppingRule,
                  settings: BenchSettings) -> dict[str, Any]:
    """CUDA-graph replays of kernel and reference: the same timer without launch overhead."""
    out: dict[str, Any] = {}
    try:
        kernel_graphs = [capture_graph(lambda s=s: ctx.custom_kernel(*s)) for s in sets]
    except Exception as exc:
        return {"graph_error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    calls = [lambda i: kernel_graphs[i % len(kernel_graphs)].replay()]
    try:
        ref_graphs = [capture_graph(lambda s=s: ctx.ref_kernel(*s)) for s in sets]
        calls.append(lambda i: ref_graphs[i % len(ref_graphs)].replay())
    except Exception as exc:
        out["graph_ref_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    m = sampler.measure(calls, rule, settings.warmup_s)
    k = stats.summarize(m.calls[0].samples_ms)
    out.update(graph_us=k.median * 1e3, graph_rse=k.rse_median, graph_n=k.n, graph_stop=m.stop)
    if len(m.calls) == 2:
        speed = bootstrap.ratio_of_medians(m.calls[1].samples_ms, m.calls[0].samples_ms, confidence=settings.confidence)
        out.update(graph_ref_us=stats.summarize(m.calls[1].samples_ms).median * 1e3,
                   graph_speedup=speed.point, graph_speedup_ci=speed.as_list())
    return out


def roofline_model(ctx: RunContext, shape: dict, inputs: tuple) -> tuple[dict[str, float], str | None, dict[str, str]]:
    """The reference's ``bytes_moved``/``flops`` for this shape, and the dtype that picks the
    compute ceiling: the shape's ``dtype`` if it names one, else the first floating input's."""
    model: dict[str, float] = {}
    notes: dict[str, str] = {}
    for name, key in (("bytes_moved", "bytes"), ("flops", "flops")):
        fn = getattr(ctx.reference, name, None)
        if not callable(fn):
            continue
        try:
            value = float(fn(**shape))
        except Exception as exc:
            notes[f"{key}_model_error"] = f"{name}({', '.join(f'{k}={v}' for k, v in shape.items())}) raised {type(exc).__name__}: {exc}"
            continue
        if value < 0 or value != value:
            notes[f"{key}_model_error"] = f"{name} returned {value}"
            continue
        model[key] = value
    dtype = rl.dtype_key(shape["dtype"]) if isinstance(shape.get("dtype"), str) else None
    if dtype is None:
        floating = [t for t in tensors_in(inputs) if t.dtype.is_floating_point]
        dtype = rl.dtype_key(floating[0].dtype) if floating else None
    return model, dtype, notes


def read_share(inputs: tuple, output: Any) -> float | None:
    """The share of the kernel's tensor bytes that it reads (its inputs) rather than writes (the
    reference's output for the same inputs), which picks the calibrated access mix it is held to."""
    read = sum(t.numel() * t.element_size() for t in tensors_in(inputs))
    written = sum(t.numel() * t.element_size() for t in tensors_in(output))
    return read / (read + written) if read + written else None


def ceilings(device: str, calibration: Obtained) -> tuple[rl.Ceiling | None, rl.Ceiling | None, str]:
    """(ceiling for the fraction, limit for 'impossible', a note when the calibration is missing or
    was passed over): this device's calibration where it has one, its datasheet entry for the rest."""
    spec = lookup(device)
    calibrated = calibration.calibration.ceiling() if calibration.calibration is not None else None
    ceiling = rl.choose_ceiling(device, spec, calibrated)
    note = calibration.note
    if ceiling is None:
        note = note or f"{device} is not in the datasheet table and not calibrated: run `ktui calibrate`"
    return ceiling, rl.impossibility_limit(spec, calibrated), note


def message(figures: dict[str, Any], roof: rl.Roofline) -> str:
    """``5.12 µs ±0.31% (n=412, noise) vs reference 7.90 µs: 1.54× [1.52, 1.57] · 62% of attainable (memory-bound, …)``"""
    lo, hi = figures["speedup_ci"]
    text = (f"{figures['kernel_us']:.2f} µs ±{figures['kernel_rse']:.2%} (n={figures['n']}, stopped on {figures['stop']})"
            f" vs reference {figures['ref_us']:.2f} µs: {figures['speedup']:.2f}× [{lo:.2f}, {hi:.2f}]")
    if roof.fraction is not None:
        text += f" · {roof.fraction:.0%} of attainable ({roof.bound}, {roof.ceiling})"
        if roof.launch_floor_s is None:
            text += f" · roofline provisional, {figures.get('roofline_provisional') or rl.NO_LAUNCH_FLOOR.split(';')[0]}"
    if roof.impossible:
        text = (f"impossible: {figures['kernel_us']:.2f} µs is below the {roof.impossible_floor_s * 1e6:.2f} µs the "
                f"datasheet allows — the timing, the output or the reference's bytes_moved/flops is wrong · ") + text
    if figures.get("throttled"):
        text += f" · throttled ({', '.join(figures.get('throttle_reasons', []))})"
    if figures.get("kernel_exposed", 0) > 0.01:
        text += f" · launch not hidden in {figures['kernel_exposed']:.0%} of samples (host time included)"
    if figures.get("calibration_s") is not None:
        text += f" · the GPU calibrated first, in {figures['calibration_s']:.1f} s (once for every workspace, not timed)"
    if figures.get("gpu_lock"):
        text += f" · {figures['gpu_lock']}"
    elif figures.get("gpu_wait_s", 0) >= 1.0:
        text += f" · waited {figures['gpu_wait_s']:.1f} s for another ktui process timing on this GPU"
    return text


def _clock_monitor():
    from ktui.worker.timing.clocks import ClockMonitor

    if "clocks" not in _process:
        _process["clocks"] = ClockMonitor()
    return _process["clocks"]
