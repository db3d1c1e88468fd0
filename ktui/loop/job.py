"""What the process that shows results asks a worker to do: one version of one kernel."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

# Seconds each rung may take before the worker is killed and the run ends "timed_out".
# Pre-checks include importing the user's module (CuTeDSL alone takes seconds to import);
# compile includes tracing a real launch and ahead-of-time compilation of every kernel.
DEFAULT_TIMEOUTS: dict[str, float] = {
    "pre-checks": 90.0,
    "compile": 180.0,
    "dumps": 60.0,
    "run": 60.0,
    "correctness": 120.0,
    "benchmark": 180.0,
}


def rung_family(rung: str) -> str:
    """``correctness[rows=4]`` → ``correctness``: timeouts and options are set per family."""
    return rung.split("[", 1)[0]


@dataclass
class Options:
    """Knobs of one run, set from the CLI or the dashboard."""

    arch: str | None = None  # target when there is no local GPU (default sm_90a)
    force_cpu: bool = False  # run the CPU tier even where a GPU exists
    benchmark: bool = True
    strict: bool = False
    seed: int | None = None  # base seed; None draws a fresh one for every run
    timeouts: dict[str, float] = field(default_factory=dict)
    bench: dict[str, Any] = field(default_factory=dict)  # timer settings (see loop/bench.py)

    def timeout_for(self, rung: str) -> float:
        family = rung_family(rung)
        return float(self.timeouts.get(family, DEFAULT_TIMEOUTS.get(family, 120.0)))


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
    format: str = "native"  # "native" | "gpumode" | "kernelbench" (see ktui.formats)
    problem: dict[str, Any] = field(default_factory=dict)  # format-specific, e.g. GPU MODE's task.yml shapes

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        data = dict(data)
        data["options"] = Options(**data.get("options", {}))
        return cls(**data)
