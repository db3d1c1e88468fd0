"""What the process that shows results asks a worker to do: one version of one kernel."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ktui.protocol.rungs import DEFAULT_TIMEOUTS, rung_family

# The problem formats a Job may carry (``Job.format``): detected from text in the parent
# (``ktui.workspace.formats``), loaded by their adapters in the worker (``ktui.worker.formats``).
NATIVE = "native"
GPUMODE = "gpumode"
KERNELBENCH = "kernelbench"

@dataclass(frozen=True)
class BenchSettings:
    """How the benchmark rung times (see ``ktui.worker.timing.sampler`` and ``ktui.measure.stats``)."""

    hot_cache: bool = False  # no L2 flush, one input set: time the kernel with its data in cache
    cuda_graph: bool = False  # also time CUDA-graph replays (no launch overhead), as extra figures
    time_s: float = 3.0  # cap on the sampling time per shape (kernel and reference together)
    warmup_s: float = 0.2  # warm-up time per shape before sampling
    rse_target: float = 0.005  # stop once each median's relative standard error is below this
    min_samples: int = 20  # per callable, before any stop
    max_samples: int = 20000  # per callable
    input_sets: int = 3  # input sets rotated between samples (fresh seeds); 1 in hot-cache mode
    flush: str = "read"  # "read" or "write": how the L2 is evicted between samples
    roofline_done: float = 0.9  # per shape, the fraction of its attainable time for "satisfied" (given: overrides ROOFLINE_DONE)
    confidence: float = 0.95  # of the speedup interval

    def __post_init__(self) -> None:
        checks = [
            (self.time_s > 0, f"the benchmark time cap must be positive, got {self.time_s}"),
            (self.warmup_s >= 0, f"the warm-up time cannot be negative, got {self.warmup_s}"),
            (0 < self.rse_target < 1, f"the RSE target must be in (0, 1), e.g. 0.005 for 0.5%, got {self.rse_target}"),
            (self.min_samples >= 3, f"at least 3 samples are needed, got min_samples={self.min_samples}"),
            (self.max_samples >= self.min_samples, f"max_samples ({self.max_samples}) is below min_samples ({self.min_samples})"),
            (self.input_sets >= 1, f"at least one input set, got {self.input_sets}"),
            (self.flush in ("read", "write"), f"the flush is 'read' or 'write', got {self.flush!r}"),
            (0 < self.roofline_done <= 1.5, f"the roofline threshold must be in (0, 1.5], e.g. 0.9, got {self.roofline_done}"),
            (0 < self.confidence < 1, f"the confidence must be in (0, 1), got {self.confidence}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchSettings:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown benchmark setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)


@dataclass
class Options:
    """Knobs of one run, set from the CLI or the dashboard."""

    arch: str | None = None  # target when there is no local GPU (default sm_90a)
    force_cpu: bool = False  # run the CPU tier even where a GPU exists
    benchmark: bool = True
    strict: bool = False
    allow_network: bool = False  # user code may use the network (``--allow-network``): closed otherwise
    seed: int | None = None  # base seed; None draws a fresh one for every run
    fresh_shapes: int = 2  # shapes the fresh-shapes rung derives from TESTS; 0 turns it off
    timeouts: dict[str, float] = field(default_factory=dict)
    bench: dict[str, Any] = field(default_factory=dict)  # BenchSettings fields that differ from the defaults

    def bench_settings(self) -> BenchSettings:
        return BenchSettings.from_dict(self.bench)

    def timeout_for(self, rung: str) -> float:
        family = rung_family(rung)
        return float(self.timeouts.get(family, DEFAULT_TIMEOUTS.get(family, 60.0)))


@dataclass
class Job:
    run_id: str
    kernel_id: str
    kernel_path: str
    reference_path: str  # "" when unresolved; ``reference_error`` says why
    reference_error: str
    reference_hash: str
    root: str
    version: int
    content_hash: str
    source: str  # the exact text that was hashed: the worker runs this, not a later save
    run_dir: str
    options: Options = field(default_factory=Options)
    format: str = "native"  # "native" | "gpumode" | "kernelbench" (see ktui.worker.formats)
    problem: dict[str, Any] = field(default_factory=dict)  # format-specific, e.g. GPU MODE's task.yml shapes
    # The reference as it was hashed (``reference_hash``), read before any user code ran: path →
    # text, the reference first, then the files it needs. The worker judges with these texts, never
    # with what is on disk by then (a kernel's import could have rewritten it).
    reference_files: dict[str, str] = field(default_factory=dict)
    reference_modules: dict[str, str] = field(default_factory=dict)  # workspace modules it imports: name → path
    # What each shape of this reference version needs in memory, as an earlier run's pre-checks
    # found it (``ktui.worker.memory``): the worker sizes only the shapes missing here.
    sizes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        data = dict(data)
        data["options"] = Options(**data.get("options", {}))
        return cls(**data)
