"""Which version of a kernel is its best: the one definition the dashboard, ``ktui diff --base
best`` and the comparison of a new version with earlier ones all use.

The best version is the one whose newest finished run passed with the highest speedup over the
reference (a version without a measured speedup, e.g. one only run on the CPU tier, is never
best); on a tie the newer version wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from ktui.protocol.events import finished_run


class Measured(Protocol):
    version: int
    verdict: str
    speedup: float | None


M = TypeVar("M", bound=Measured)


def best_version(points: Iterable[M], exclude: int | None = None) -> M | None:
    """The best of ``points`` (one per version: its newest finished run), leaving out ``exclude``."""
    timed = [p for p in points if p.verdict == "passed" and p.version != exclude and _finite(p.speedup)]
    return max(timed, key=lambda p: (p.speedup, p.version)) if timed else None


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


class Stored(Protocol):
    version: int
    verdict: str


S = TypeVar("S", bound=Stored)


def newest_per_version(runs: Iterable[S]) -> dict[int, S]:
    """Per version, its newest finished run (``runs`` newest first, as the history lists them): a
    cancelled or interrupted run says nothing of its version."""
    chosen: dict[int, S] = {}
    for run in runs:
        if run.version not in chosen and finished_run(run.verdict):
            chosen[run.version] = run
    return chosen


class StoredRun(Stored, Protocol):
    summary: dict[str, Any]


R = TypeVar("R", bound=StoredRun)


@dataclass(frozen=True)
class _Point:
    version: int
    verdict: str
    speedup: float | None


def best_run(runs: Iterable[R], exclude: int | None = None) -> R | None:
    """The best version's newest finished run among ``runs`` (newest first), leaving out ``exclude``."""
    newest = newest_per_version(runs)
    points = [_Point(v, r.verdict, r.summary.get("speedup") if isinstance(r.summary, dict) else None)
              for v, r in newest.items()]
    best = best_version(points, exclude=exclude)
    return newest[best.version] if best is not None else None
