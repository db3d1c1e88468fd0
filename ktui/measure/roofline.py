"""How close a measured time is to what the hardware allows.

A reference may give ``bytes_moved(**shape)`` and ``flops(**shape)``. Each gives a floor: no
kernel can move those bytes faster than ``bytes / bandwidth`` nor do those operations faster
than ``flops / compute rate``. Nor can any kernel finish faster than the GPU's own launch to
completion, the **launch floor** ``ktui calibrate`` measures: without it a 786 KB add at the
launch floor reads "4% of roofline" and an agent optimises what cannot get faster. The
attainable time combines the three by the model that fitted the calibration's own copies best
(``LaunchFloor.model``: the larger of the three, or the launch floor plus the larger transfer),
and the fraction is ``attainable / measured`` (1.0 = as fast as this device allows), with the
term that decides it named: launch-bound, memory-bound or compute-bound. Without a calibrated
launch floor the attainable time is the larger transfer floor alone, and the figures say so.

Ceilings come from ``ktui calibrate`` (this device, measured) in preference to the datasheet
table (``ktui.measure.datasheets``). HBM sustains more the larger the share of reads, so a calibrated
memory ceiling is the one measured for the access mix at or just above the kernel's own share of
reads (``Ceiling.for_reads``): a softmax (half reads) is held to the 1:1 copy, an add (two thirds)
to the 2-read-1-write add, a reduction to the read-only sum. A calibrated ceiling is an achieved rate, not a peak, so a kernel may
slightly beat it; the **impossible** flag is therefore judged against the datasheet peak, which
nothing can beat — a kernel faster than that floor has a measurement or correctness problem
(or a wrong model in the reference), and must not be celebrated.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ktui.measure.datasheets import DeviceSpec

# Without a datasheet entry, "impossible" means beating the calibrated floor by this factor: a
# plain copy and a cuBLAS matmul reach roughly 80-90% of their peaks, so a quarter more than the
# calibrated rate is past any peak we could have known.
CALIBRATED_IMPOSSIBLE_MARGIN = 1.25

DEFAULT_DONE = 0.9  # fraction of the attainable time shown as "at roofline"; every shape at it: "satisfied"

LAUNCH_BOUND, MEMORY_BOUND, COMPUTE_BOUND = "launch-bound", "memory-bound", "compute-bound"
MODEL_MAX = "max"  # attainable = max(launch floor, bytes / bandwidth, flops / rate)
MODEL_SUM = "sum"  # attainable = launch floor + max(bytes / bandwidth, flops / rate)
MODELS = {MODEL_MAX: "max(launch floor, bytes/bandwidth, flops/rate)",
          MODEL_SUM: "launch floor + max(bytes/bandwidth, flops/rate)"}
NO_LAUNCH_FLOOR = "no launch floor calibrated: run ktui calibrate; max(bytes/bandwidth, flops/rate)"

_DTYPE_KEYS = {
    "float64": "fp64",
    "double": "fp64",
    "fp64": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "tf32": "tf32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "fp8": "fp8",
}


def dtype_key(dtype: object) -> str | None:
    """``torch.bfloat16`` / ``"bfloat16"`` → ``"bf16"``; all float8 kinds → ``"fp8"``; None for
    types with no compute ceiling (integers, bool)."""
    name = str(dtype).removeprefix("torch.").lower()
    if name.startswith("float8"):
        return "fp8"
    return _DTYPE_KEYS.get(name)


@dataclass(frozen=True)
class Ceiling:
    """The rates a roofline divides by, each with where it came from."""

    device: str
    bandwidth_gbs: float | None
    tflops: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # "bandwidth"/dtype key → "calibrated …"/"datasheet …"
    mixes: tuple[Mix, ...] = ()  # calibrated bandwidth per access mix; empty: one figure for every kernel
    launch: LaunchFloor | None = None  # None: not calibrated, the transfer floors alone

    def source_of(self, part: str) -> str:
        return self.sources.get(part, "")

    def for_reads(self, read_share: float | None) -> Ceiling:
        """This ceiling with the bandwidth of the measured mix whose share of reads is the kernel's
        or the next above it (an upper bound: more reads never make HBM slower); itself when no
        mixes were measured or the kernel's share is unknown."""
        if not self.mixes or read_share is None:
            return self
        above = [m for m in self.mixes if m.read_share >= read_share - MIX_SLACK]
        mix = min(above, key=lambda m: m.read_share) if above else max(self.mixes, key=lambda m: m.gbs)
        base = self.sources.get("bandwidth", "").split(", ")[0]
        note = f"{base}, {mix.title} for {read_share:.0%} reads" if base else f"{mix.title} for {read_share:.0%} reads"
        return replace(self, bandwidth_gbs=mix.gbs, sources={**self.sources, "bandwidth": note})


@dataclass(frozen=True)
class Mix:
    """One calibrated access pattern: its share of the bytes that are reads, and its bandwidth."""

    title: str
    read_share: float
    gbs: float


@dataclass(frozen=True)
class LaunchFloor:
    """The shortest launch to completion under the benchmark's timer, and how it combines with
    the transfer floors (the model that fitted the calibration's copies across sizes)."""

    seconds: float
    model: str  # MODEL_MAX or MODEL_SUM
    source: str = ""  # "calibrated 2026-12-02"

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"a launch-floor model is one of {', '.join(MODELS)}, got {self.model!r}")
        if not self.seconds > 0:
            raise ValueError(f"a launch floor must be positive, got {self.seconds}")


# A kernel's share of reads is estimated from its tensors; this much below a mix still uses it.
MIX_SLACK = 0.02


def datasheet_ceiling(spec: DeviceSpec) -> Ceiling:
    note = f"datasheet {spec.name}"
    return Ceiling(spec.name, spec.bandwidth_gbs, dict(spec.tflops), {k: note for k in ("bandwidth", *spec.tflops)})


def choose_ceiling(device: str, spec: DeviceSpec | None, calibrated: Ceiling | None) -> Ceiling | None:
    """Calibrated figures where measured, the datasheet for the rest; None if neither exists."""
    if spec is None and calibrated is None:
        return None
    sheet = datasheet_ceiling(spec) if spec else Ceiling(device, None)
    if calibrated is None:
        return sheet
    tflops = {**sheet.tflops, **calibrated.tflops}
    sources = {**sheet.sources, **calibrated.sources}
    bandwidth = calibrated.bandwidth_gbs if calibrated.bandwidth_gbs else sheet.bandwidth_gbs
    if not calibrated.bandwidth_gbs and sheet.bandwidth_gbs:
        sources["bandwidth"] = sheet.sources["bandwidth"]
    return Ceiling(device, bandwidth, tflops, sources, calibrated.mixes if calibrated.bandwidth_gbs else (),
                   calibrated.launch)


def impossibility_limit(spec: DeviceSpec | None, calibrated: Ceiling | None) -> Ceiling | None:
    """The rates nothing can exceed: the datasheet peaks, else the calibrated rates plus a margin."""
    if spec is not None:
        return datasheet_ceiling(spec)
    if calibrated is None:
        return None
    m = CALIBRATED_IMPOSSIBLE_MARGIN
    return Ceiling(
        calibrated.device,
        calibrated.bandwidth_gbs * m if calibrated.bandwidth_gbs else None,
        {k: v * m for k, v in calibrated.tflops.items()},
        {k: f"{v} × {m}" for k, v in calibrated.sources.items()},
    )


@dataclass(frozen=True)
class Floors:
    memory_s: float | None
    compute_s: float | None
    launch: LaunchFloor | None = None

    @property
    def transfer_s(self) -> float | None:
        present = [f for f in (self.memory_s, self.compute_s) if f is not None]
        return max(present) if present else None

    @property
    def floor_s(self) -> float | None:
        """The attainable time; None without a model of the work (the launch floor alone says nothing)."""
        transfer = self.transfer_s
        if transfer is None or self.launch is None:
            return transfer
        if self.launch.model == MODEL_SUM:
            return self.launch.seconds + transfer
        return max(self.launch.seconds, transfer)

    @property
    def bound(self) -> str | None:
        transfer = self.transfer_s
        if transfer is None:
            return None
        if self.launch is not None and self.launch.seconds >= transfer:
            return LAUNCH_BOUND
        return MEMORY_BOUND if self.memory_s == transfer else COMPUTE_BOUND


def floors(bytes_moved: float | None, flops: float | None, dtype: str | None, ceiling: Ceiling) -> Floors:
    memory = bytes_moved / (ceiling.bandwidth_gbs * 1e9) if bytes_moved is not None and ceiling.bandwidth_gbs else None
    rate = ceiling.tflops.get(dtype) if dtype else None
    compute = flops / (rate * 1e12) if flops is not None and rate else None
    return Floors(memory, compute, ceiling.launch)


@dataclass(frozen=True)
class Roofline:
    gbps: float | None  # achieved
    tflops: float | None  # achieved
    floor_s: float | None  # the attainable time
    bound: str | None  # LAUNCH_BOUND | MEMORY_BOUND | COMPUTE_BOUND
    fraction: float | None  # attainable / measured
    ceiling: str  # what the deciding floor was divided by, and where that rate came from
    at_roofline: bool
    impossible: bool
    impossible_floor_s: float | None = None  # the floor it beat, when impossible
    model: str = ""  # how the attainable time was combined (names a missing launch floor)
    launch_floor_s: float | None = None

    def figures(self) -> dict:
        out: dict = {}
        if self.gbps is not None:
            out["gbps"] = self.gbps
        if self.tflops is not None:
            out["tflops"] = self.tflops
        if self.fraction is not None:
            out.update(roofline=self.fraction, bound=self.bound, attainable_us=self.floor_s * 1e6,
                       roofline_model=self.model, ceiling=self.ceiling, at_roofline=self.at_roofline,
                       impossible=self.impossible)
            if self.launch_floor_s is not None:
                out["launch_floor_us"] = self.launch_floor_s * 1e6
        return out


def evaluate(
    seconds: float,
    bytes_moved: float | None,
    flops: float | None,
    dtype: str | None,
    ceiling: Ceiling | None,
    limit: Ceiling | None = None,
    done: float = DEFAULT_DONE,
    check_impossible: bool = True,
) -> Roofline:
    """Achieved rates, the fraction of the attainable time against ``ceiling`` (and its launch
    floor), impossible against ``limit`` (the transfer floors alone: a launch floor is no peak).

    ``check_impossible`` is off for hot-cache timing, where repeated inputs are served from L2
    and the DRAM floor is not a floor.
    """
    if seconds <= 0:
        raise ValueError(f"a measured time must be positive, got {seconds}")
    if not 0 < done <= 1.5:
        raise ValueError(f"the roofline threshold must be in (0, 1.5], got {done}")
    gbps = bytes_moved / seconds / 1e9 if bytes_moved is not None else None
    tflops = flops / seconds / 1e12 if flops is not None else None
    if ceiling is None:
        return Roofline(gbps, tflops, None, None, None, "", False, False)
    used = floors(bytes_moved, flops, dtype, ceiling)
    if used.floor_s is None:
        return Roofline(gbps, tflops, None, None, None, "", False, False)
    fraction = used.floor_s / seconds
    launch = ceiling.launch
    if used.bound == LAUNCH_BOUND:
        described = f"launch floor {launch.seconds * 1e6:.2f} µs ({launch.source})"
    elif used.bound == MEMORY_BOUND:
        described = f"{ceiling.bandwidth_gbs:.0f} GB/s ({ceiling.source_of('bandwidth')})"
    else:
        described = f"{dtype} {ceiling.tflops[dtype]:.1f} TFLOP/s ({ceiling.source_of(dtype)})"
    model = MODELS[launch.model] if launch is not None else NO_LAUNCH_FLOOR
    impossible, beaten = False, None
    if check_impossible and limit is not None:
        hard = floors(bytes_moved, flops, dtype, limit).floor_s
        if hard is not None and seconds < hard:
            impossible, beaten = True, hard
    at = fraction >= done and not impossible
    return Roofline(gbps, tflops, used.floor_s, used.bound, fraction, described, at, impossible, beaten, model,
                    launch.seconds if launch is not None else None)
