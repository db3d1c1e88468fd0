"""Is this version faster? Labels a run's benchmark figures against the kernel's earlier versions.

The worker times one version; only the process that owns the history can say how that compares.
``VersionComparer`` sits in the session's event stream, before the store and the printers, and
adds to each ok ``benchmark[...]`` rung and to the run's summary:

- against the **previous** version (the newest other version that passed on this device with
  the same reference): ``label`` (faster / slower / within noise), ``vs_version``,
  ``vs_ratio`` (old time / new time: >1 is faster) and ``vs_ci``;
- against the **best** version so far (``ktui.history.best``: the highest speedup): ``best_version``,
  ``best_ratio``, ``best_label``.

Only runs on the same GPU model are compared: where other versions ran on another model, the
summary's ``compare_note`` says which were left out.

Two runs are not interleaved, so the interval of ``old/new`` comes from the two medians' relative
standard errors, and a change is only called when that interval clears a run-to-run noise floor
(what one run's samples cannot see: another process, another allocation, another clock state).
The floors are the timer's run-to-run targets, which ``tests/benchmarks/timer_fidelity.py`` checks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.history import sassdiff
from ktui.history.best import best_version
from ktui.history.store import Baseline, Store
from ktui.measure import stats
from ktui.protocol.events import Event, RunFinished, RungFinished, RunStarted, first_failure

FLOOR_AT_LEAST_50US = 0.01  # run-to-run spread target for kernels of 50 µs and more
# A jump this large over the best version, with the machine code unchanged, is not believed.
SUSPICIOUS_JUMP = 10.0
FLOOR_SHORTER = 0.03  # and for shorter kernels (launch and clock jitter weigh more)


def noise_floor(kernel_us: float) -> float:
    return FLOOR_AT_LEAST_50US if kernel_us >= 50 else FLOOR_SHORTER


@dataclass(frozen=True)
class Comparison:
    version: int
    ratio: float  # old time / new time: above 1 the new version is faster
    low: float
    high: float
    label: str
    shapes: int

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "ratio": self.ratio, "ci": [self.low, self.high], "label": self.label,
                "shapes": self.shapes}


def shape_change(old: dict[str, Any], new: dict[str, Any]) -> tuple[stats.Interval, float] | None:
    """``old/new`` kernel time of one shape with its interval and noise floor; None when the two
    were not measured alike (hot vs cold cache) or lack the figures."""
    if old.get("cache", "cold") != new.get("cache", "cold"):
        return None
    try:
        o_us, n_us = float(old["kernel_us"]), float(new["kernel_us"])
        o_rse, n_rse = float(old["kernel_rse"]), float(new["kernel_rse"])
    except (KeyError, TypeError, ValueError):
        return None
    if o_us <= 0 or n_us <= 0:
        return None
    return stats.ratio_from_medians(o_us, o_rse, n_us, n_rse), noise_floor(min(o_us, n_us))


def compare(current: dict[str, dict[str, Any]], baseline: Baseline) -> Comparison | None:
    """The geometric mean over the shapes both runs timed."""
    changes = [c for rung, figures in current.items() if rung in baseline.figures
               if (c := shape_change(baseline.figures[rung], figures)) is not None]
    if not changes:
        return None
    interval = stats.geometric_mean_interval([c[0] for c in changes])
    floor = sum(c[1] for c in changes) / len(changes)
    return Comparison(baseline.version, interval.point, interval.low, interval.high, stats.label(interval, floor),
                      len(changes))


def best_of(baselines: list[Baseline]) -> Baseline | None:
    """The best earlier version (``ktui.history.best``) among those comparable with this run:
    the ones that timed the most shapes, so a version timed on fewer cannot win by omission."""
    def timed(b: Baseline) -> int:
        return sum(isinstance(f.get("kernel_us"), (int, float)) for f in b.figures.values())

    most = max((timed(b) for b in baselines), default=0)
    return best_version([b for b in baselines if most and timed(b) == most])


class VersionComparer:
    """Annotates one session's events with comparisons against the history (see module doc)."""

    def __init__(self, store: Store, state_dir: Path | None = None, jump: float = SUSPICIOUS_JUMP):
        self.store = store
        self.state_dir = state_dir
        self.jump = jump
        self._runs: dict[str, _RunState] = {}
        self._notes: dict[str, str] = {}  # run id → why some earlier versions were not compared

    def __call__(self, event: Event) -> Event:
        if isinstance(event, RunStarted):
            if event.tier == "gpu":
                baselines = self.store.benchmark_baselines(event.kernel, event.device, event.reference_hash, event.version)
                if baselines:
                    self._runs[event.run_id] = _RunState(baselines[0], best_of(baselines), event.kernel, event.version)
                note = self._other_models(event, bool(baselines))
                if note:
                    self._notes[event.run_id] = note
            return event
        if isinstance(event, RunFinished) and event.run_id in self._notes:
            event = dataclasses.replace(event, summary={**event.summary, "compare_note": self._notes.pop(event.run_id)})
        state = self._runs.get(event.run_id)
        if state is None:
            return event
        if isinstance(event, RungFinished) and event.rung.startswith("benchmark[") and event.ok:
            state.current[event.rung] = event.figures
            return dataclasses.replace(event, figures={**event.figures, **state.rung_figures(event.rung, event.figures)})
        if isinstance(event, RunFinished):
            self._runs.pop(event.run_id, None)
            extra = state.summary()
            if not extra:
                return event
            event = dataclasses.replace(event, summary={**event.summary, **extra})
            doubt = self._unbelievable_jump(state, extra.get("vs_best"))
            if doubt and event.verdict == "passed":
                event = dataclasses.replace(event, verdict="suspicious", message=doubt,
                                            summary={**event.summary,
                                                     "first_failure": first_failure("benchmark", "suspicious", doubt)})
            return event
        return event

    def _other_models(self, event: RunStarted, compared: bool) -> str:
        """A note when earlier versions passed on another GPU model: their times are not this one's."""
        others = self.store.other_devices(event.kernel, event.device, event.reference_hash, event.version)
        if not others:
            return ""
        where = ", ".join(others)
        if compared:
            return f"compared only with runs on {event.device}; runs on {where} were left out"
        return f"not compared: earlier versions ran on {where}, this one on {event.device}"

    def _unbelievable_jump(self, state: _RunState, vs_best: dict | None) -> str:
        """A version ``jump``× faster than the best one with the same SASS: the speed comes from
        somewhere other than the kernel (a cache, the timer, the reference's timing)."""
        if not vs_best or vs_best["ratio"] < self.jump or self.state_dir is None or state.best is None:
            return ""

        try:
            diff = sassdiff.diff_versions(self.state_dir, state.kernel, state.best.version, state.version)
        except sassdiff.DiffError:
            return ""
        if any(f.status != "same" for f in diff.functions):
            return ""
        return (f"{vs_best['ratio']:.1f}× faster than the best version v{state.best.version} with identical SASS: "
                "that speed did not come from the kernel's code")


@dataclass
class _RunState:
    previous: Baseline
    best: Baseline | None
    kernel: str = ""
    version: int = 0
    current: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def rung_figures(self, rung: str, figures: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        prev = self.previous.figures.get(rung)
        change = shape_change(prev, figures) if prev else None
        if change:
            interval, floor = change
            out.update(label=stats.label(interval, floor), vs_version=self.previous.version, vs_ratio=interval.point,
                       vs_ci=interval.as_list())
        best = self.best.figures.get(rung) if self.best else None
        change = shape_change(best, figures) if best else None
        if change:
            interval, floor = change
            out.update(best_version=self.best.version, best_ratio=interval.point, best_label=stats.label(interval, floor))
        return out

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        prev = compare(self.current, self.previous)
        if prev:
            out["vs_previous"] = prev.as_dict()
            out["label"] = prev.label
        best = compare(self.current, self.best) if self.best else None
        if best:
            out["vs_best"] = best.as_dict()
        return out
