"""Timing GPU work from Python: CUDA events, cold caches, hidden launches, adaptive repetition.

One sample of one callable is, on the current stream:

    [L2 flush] [spin pad] (start event) call(i) (end event)   → synchronize, read end - start

- **L2 flush** (default): before every sample, a sweep over a buffer twice the size of the L2,
  so the callable never finds its inputs (or the previous call's outputs) in cache. See ``Flush``.
- **Spin pad**: ``torch.cuda._sleep`` keeps the GPU busy while Python enqueues the start event,
  the callable's launches and the end event. Without it the start event fires while the CPU is
  still inside the launch path and a 5 µs kernel measures as 20 µs of Python. The pad is sized
  from the measured host time of the call and doubled whenever a sample shows the GPU reached
  the start event before the end event was enqueued (``exposed``), which is checked every sample.
  An exposed sample times host work, so it is taken again (with the grown pad) up to ``RETAKES``
  times; only one still exposed after that is kept, and counted.
- Several callables (kernel and reference) are **interleaved** round by round, alternating their
  order, each round on the same input set, so they see the same conditions and their samples
  pair up; input sets **rotate** with the round number.
- **Warm-up by time** (not by count) until clocks and caches of the host path have settled and
  the pads stopped growing; then sample until ``ktui.measure.stats.StoppingRule`` says stop.
- The garbage collector is paused while sampling (as ``timeit`` does): a collection inside the
  launch path would be timed as GPU idle.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from ktui.measure.datasheets import lookup
from ktui.measure.stats import StoppingRule
from ktui.worker.timing.clocks import ClockLog, ClockMonitor

MIN_PAD_US = 20.0
RETAKES = 3  # an exposed sample is taken again this many times at most (a busy host's stall, not the call's)
MAX_PAD_US = 20_000.0  # a call that needs more than this is synchronising with the host
FALLBACK_FLUSH_BYTES = 256 * 2**20  # when neither the device nor the table knows the L2 size

Call = Callable[[int], Any]


def l2_bytes() -> tuple[int | None, str]:
    """The L2 size of the current device and where it was read."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    size = getattr(props, "L2_cache_size", 0)
    if size:
        return int(size), "device"

    spec = lookup(props.name)
    if spec is not None and spec.l2_mb:
        return int(spec.l2_mb * 2**20), f"datasheet {spec.name}"
    return None, "unknown"


def flush_bytes(l2: int | None) -> int:
    """The flush buffer's size for an L2 of ``l2`` bytes (``Flush``): what a benchmark holds besides the problem."""
    return 2 * l2 if l2 else FALLBACK_FLUSH_BYTES


class Flush:
    """Evicts the L2 between samples.

    Size: twice the L2. One L2-sized sweep is not enough to evict everything — the replacement
    policy is not strict LRU, and Hopper and Ampere split the L2 into two partitions whose
    far-side lines can be duplicated near the SMs that read them — so a kernel's inputs could
    partly survive one sweep; a second L2's worth leaves no line of the previous working set.

    Mode ``read`` (default) sums a buffer that is never written, so the L2 is left holding only
    clean lines: the timed call does not pay to write back the flush's dirty lines on eviction,
    which a write sweep (``write``: zeroing the buffer, what ``triton.testing.do_bench`` does)
    would charge to a memory-bound kernel. Both evict equally; ``hot`` does nothing.
    """

    def __init__(self, mode: str = "read"):
        if mode not in ("read", "write", "hot"):
            raise ValueError(f"flush mode must be read, write or hot, got {mode!r}")
        self.mode = mode
        self.bytes = 0
        self.l2, self.l2_source = l2_bytes()
        self._buffer: torch.Tensor | None = None
        if mode != "hot":
            self.bytes = flush_bytes(self.l2)
            dtype = torch.float32 if mode == "read" else torch.int8
            numel = self.bytes // torch.empty(0, dtype=dtype).element_size()
            self._buffer = torch.ones(numel, dtype=dtype, device="cuda")

    def __call__(self) -> None:
        if self.mode == "read":
            self._buffer.sum()
        elif self.mode == "write":
            self._buffer.zero_()

    def describe(self) -> str:
        if self.mode == "hot":
            return "hot cache (no flush)"
        l2 = f"2 × the {self.l2 / 2**20:.0f} MiB L2 ({self.l2_source})" if self.l2 else "L2 size unknown"
        return f"{self.mode} {self.bytes / 2**20:.0f} MiB ({l2})"


class Pad:
    """``torch.cuda._sleep`` in microseconds: the spin kernel counts SM clock cycles, so its rate
    is measured once per process."""

    _cycles_per_us: float | None = None

    def __init__(self) -> None:
        self.available = hasattr(torch.cuda, "_sleep")
        if self.available and Pad._cycles_per_us is None:
            Pad._cycles_per_us = self._calibrate()

    @staticmethod
    def _calibrate() -> float:
        """The fastest rate seen (highest clock): at any lower clock a pad lasts longer, never shorter."""
        cycles = 2_000_000
        rates = []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(cycles)
            end.record()
            end.synchronize()
            rates.append(cycles / (start.elapsed_time(end) * 1e3))
        return max(rates)

    def __call__(self, us: float) -> None:
        if self.available and us > 0:
            torch.cuda._sleep(max(1, int(us * Pad._cycles_per_us)))


@dataclass
class CallTiming:
    """One callable's samples (device milliseconds) and how its launches went."""

    samples_ms: list[float] = field(default_factory=list)
    host_ms: list[float] = field(default_factory=list)  # CPU time of the call (launch cost)
    exposed: int = 0  # kept samples where the GPU waited for the launch (see module docstring)
    retaken: int = 0  # exposed samples taken again rather than kept
    pad_us: float = MIN_PAD_US
    warm_host_us: list[float] = field(default_factory=list)
    synchronizes: bool = False  # the call waited for the GPU itself: no pad can hide its launch

    @property
    def exposed_fraction(self) -> float:
        return self.exposed / len(self.samples_ms) if self.samples_ms else 0.0


@dataclass
class Measurement:
    calls: list[CallTiming]
    stop: str
    elapsed_s: float
    warmup_s: float
    warmup_rounds: int
    flush: str
    pad: str
    clocks: ClockLog


class Sampler:
    """Takes samples of callables; owns the flush, the pad and one pair of events."""

    def __init__(self, flush: Flush, clocks: ClockMonitor | None = None,
                 inspect: Callable[[int, int, Any], None] | None = None):
        self.flush = flush
        self.pad = Pad()
        self.clocks = clocks
        # Called with (callable index, round, what the call returned) after each kept sample,
        # outside the timed region: lets the timed outputs themselves be checked.
        self.inspect = inspect
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def sample(self, call: Call, i: int, timing: CallTiming, keep: bool = True, index: int = 0) -> bool:
        """One sample (taken again while its launch was exposed, when kept); returns whether the
        launch of the sample that counts was exposed (the pad was too short)."""
        for attempt in range(RETAKES + 1):
            exposed, host_s, result = self._take(call, i, timing, keep)
            if not (keep and exposed and not timing.synchronizes and attempt < RETAKES):
                break
            timing.retaken += 1
        if keep:
            timing.samples_ms.append(self._start.elapsed_time(self._end))
            timing.host_ms.append(host_s * 1e3)
            timing.exposed += int(exposed)
            if self.inspect is not None:
                self.inspect(index, i, result)
        return exposed

    def _take(self, call: Call, i: int, timing: CallTiming, keep: bool) -> tuple[bool, float, Any]:
        """Flush, pad, time one call; grow the pad when the launch was exposed."""
        self.flush()
        if not timing.synchronizes:
            self.pad(timing.pad_us)
        self._start.record()
        t0 = time.perf_counter()
        result = call(i)
        host_s = time.perf_counter() - t0
        self._end.record()
        exposed = self._start.query()  # the GPU already passed the start event: it waited for us
        self._end.synchronize()
        if not keep:
            timing.warm_host_us.append(host_s * 1e6)
        if exposed and not timing.synchronizes:
            if timing.pad_us >= MAX_PAD_US:
                timing.synchronizes = True
            timing.pad_us = min(MAX_PAD_US, 2 * timing.pad_us)
        elif not keep and not timing.synchronizes:
            # Warm-up sizes the pad from the typical host time (the median: the first calls may
            # include lazy initialisation); afterwards only an exposure grows it.
            typical = statistics.median(timing.warm_host_us)
            timing.pad_us = min(MAX_PAD_US, max(timing.pad_us, 2 * typical + MIN_PAD_US))
        return exposed, host_s, result

    def measure(self, calls: Sequence[Call], rule: StoppingRule, warmup_s: float) -> Measurement:
        """Warm up for ``warmup_s``, then interleave ``calls`` round by round until ``rule`` stops."""
        timings = [CallTiming() for _ in calls]
        log = self.clocks.log() if self.clocks else ClockLog("unavailable: not requested")
        gc.collect()
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            warm_rounds, warm_s = self._warm_up(calls, timings, warmup_s)
            self._read_clocks(log)
            rounds, last_check, stop = 0, 0, None
            started = time.perf_counter()
            while stop is None:
                order = range(len(calls)) if rounds % 2 == 0 else reversed(range(len(calls)))
                for j in order:
                    self.sample(calls[j], rounds, timings[j], index=j)
                rounds += 1
                elapsed = time.perf_counter() - started
                if rule.check_due(rounds, last_check) or elapsed >= rule.time_cap_s:
                    last_check = rounds
                    stop = rule.decide([t.samples_ms for t in timings], elapsed)
                    if self.clocks is not None and (self.clocks.cheap or stop is not None):
                        self._read_clocks(log)
            elapsed = time.perf_counter() - started
        finally:
            if gc_was_enabled:
                gc.enable()
        pad = "torch.cuda._sleep" if self.pad.available else "unavailable (torch.cuda._sleep missing): launches may be timed"
        return Measurement(timings, stop, elapsed, warm_s, warm_rounds, self.flush.describe(), pad, log)

    def _warm_up(self, calls: Sequence[Call], timings: list[CallTiming], warmup_s: float) -> tuple[int, float]:
        """At least ``warmup_s`` and 3 rounds, and on until a round has no exposed launch (bounded)."""
        started = time.perf_counter()
        rounds = 0
        while True:
            exposed = [self.sample(call, rounds, timings[j], keep=False) for j, call in enumerate(calls)]
            rounds += 1
            elapsed = time.perf_counter() - started
            settled = not any(e and not t.synchronizes for e, t in zip(exposed, timings))
            if rounds >= 3 and elapsed >= warmup_s and (settled or elapsed >= 10 * warmup_s + 1.0):
                return rounds, elapsed

    def _read_clocks(self, log: ClockLog) -> None:
        if self.clocks is not None:
            self.clocks.sample(log)


def capture_graph(fn: Callable[[], Any]) -> torch.cuda.CUDAGraph:
    """``fn``'s GPU work captured as a CUDA graph, after two eager calls on a side stream (the
    warm-up torch's graph documentation asks for: lazy initialisation must not be captured)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph
