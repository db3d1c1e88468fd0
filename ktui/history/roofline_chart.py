"""Each benchmark shape of a kernel's versions on this GPU's roofline: the chart's points and roofs.

A point is one shape as one version ran it (its version's newest finished run): the arithmetic
intensity the reference's model gives it (FLOPs per byte moved), the rate it reached, the rate its
attainable time allows (the launch floor and the transfer it was judged against, as the benchmark
rung recorded it) and whether it reached the stop threshold. The roofs are the GPU's own: its
calibration (the memory bandwidth of each access mix, the matmul rate of each dtype, the launch
floor) where ``ktui calibrate`` measured it, else its datasheet peaks, marked provisional. The
dashboard's history pane draws both on key ``o``; ``ktui history --json`` carries them per run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ktui.history.finished import finished_by_version
from ktui.history.store import Store
from ktui.measure import calibrate
from ktui.measure.datasheets import lookup
from ktui.measure.roofline import DEFAULT_DONE, Ceiling, choose_ceiling
from ktui.protocol.events import OK, PASSED

BENCHMARK = "benchmark["


@dataclass(frozen=True)
class Point:
    """One benchmark shape of one version, placed on the roofline."""

    version: int
    shape: str
    dtype: str | None
    intensity: float  # FLOPs per byte moved, by the reference's model
    tflops: float  # the rate reached
    attainable_tflops: float | None  # the rate of its attainable time (launch floor and transfer)
    fraction: float | None  # attainable time / measured time
    bound: str | None
    reached: bool  # fraction at or above the stop threshold
    kernel_us: float
    gbps: float
    read_share: float | None  # of its bytes, the share read: which memory roof holds it
    device: str


@dataclass(frozen=True)
class Roofs:
    """The GPU's ceilings the chart draws."""

    device: str
    source: str  # "calibrated 2026-12-02" or "datasheet NVIDIA H200 SXM 141GB"
    provisional: bool  # datasheet peaks: not measured on this machine
    driver: str  # the calibration's driver ("" for the datasheet)
    ceiling: Ceiling
    done: float  # the stop threshold: each shape's fraction of its attainable time

    def memory(self, read_share: float | None) -> tuple[str, float] | None:
        """The memory roof a shape with this share of reads is held to: ``(its name, GB/s)``."""
        held = self.ceiling.for_reads(read_share)
        if not held.bandwidth_gbs:
            return None
        mix = next((m for m in self.ceiling.mixes if m.gbs == held.bandwidth_gbs), None)
        return (mix.title if mix else "memory", held.bandwidth_gbs)

    def to_json(self) -> dict[str, Any]:
        launch = self.ceiling.launch
        return {"device": self.device, "source": self.source, "provisional": self.provisional, "driver": self.driver,
                "memory_gbs": self.ceiling.bandwidth_gbs,
                "memory_mixes": [{"title": m.title, "read_share": m.read_share, "gbs": m.gbs} for m in self.ceiling.mixes],
                "compute_tflops": dict(self.ceiling.tflops),
                "launch_floor_us": launch.seconds * 1e6 if launch else None, "launch_model": launch.model if launch else None,
                "done": self.done}


def points_of_run(version: int, device: str, rungs: list[dict[str, Any]], done: float) -> list[Point]:
    """The run's timed shapes that have both a byte and a FLOP model (a shape without one has no
    place on a roofline), from its benchmark rungs' figures."""
    out = []
    for rung in rungs:
        figures = rung.get("figures") or {}
        if not rung["rung"].startswith(BENCHMARK) or rung.get("status") != OK:
            continue
        tflops, gbps, kernel_us = (_positive(figures.get(k)) for k in ("tflops", "gbps", "kernel_us"))
        if tflops is None or gbps is None or kernel_us is None:
            continue
        attainable_us = _positive(figures.get("attainable_us"))
        fraction = _positive(figures.get("roofline"))
        out.append(Point(version=version, shape=_shape(rung["rung"]), dtype=figures.get("dtype"),
                         intensity=tflops * 1e12 / (gbps * 1e9), tflops=tflops,
                         attainable_tflops=tflops * kernel_us / attainable_us if attainable_us else None,
                         fraction=fraction, bound=figures.get("bound"),
                         reached=fraction is not None and fraction >= done, kernel_us=kernel_us, gbps=gbps,
                         read_share=_positive(figures.get("read_share")), device=device))
    return out


def points(store: Store, kernel: str, limit: int = 200) -> list[Point]:
    """Every version's timed shapes, from its newest finished run that has any, oldest version first."""
    chosen: dict[int, list[Point]] = {}
    for version, finished in finished_by_version(store.runs(kernel, limit=limit)).items():
        for run in (r for r in finished if r.verdict == PASSED):
            found = points_of_run(run.version, run.device, store.rungs(run.run_id), done_of(run.summary))
            if found:
                chosen[version] = found
                break
    return [p for version in sorted(chosen) for p in chosen[version]]


def done_of(summary: dict[str, Any]) -> float:
    value = summary.get("roofline_done")
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_DONE


def roofs_for(root: Path, device: str, done: float = DEFAULT_DONE) -> tuple[Roofs | None, str]:
    """This GPU's roofs, and "" or why there are none: its newest calibration in the workspace,
    else its datasheet (provisional), else none (a GPU in neither)."""
    spec = lookup(device)
    try:
        cal = calibrate.newest_for_device(root, device)
    except calibrate.CalibrationError as exc:
        cal, why = None, f"calibration not used: {exc}"
    else:
        why = ""
    ceiling = choose_ceiling(device, spec, cal.ceiling() if cal else None)
    if ceiling is None:
        return None, why or f"{device} is not in the datasheet table and not calibrated: run `ktui calibrate`"
    if cal is not None:
        return Roofs(device, f"calibrated {cal.date[:10]}", False, cal.driver, ceiling, done), why
    return Roofs(device, f"datasheet {spec.name}", True, "", ceiling, done), why


def chart_json(points_: list[Point], roofs: Roofs | None) -> dict[str, Any]:
    """What ``ktui history --json`` carries of a run's place on the roofline."""
    return {"points": [asdict(p) for p in points_], "roofs": roofs.to_json() if roofs else None}


def _shape(rung: str) -> str:
    return rung[len(BENCHMARK):].rsplit("]", 1)[0]


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and value > 0 else None
