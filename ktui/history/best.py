"""Which version of a kernel is its best: the one definition the dashboard, ``ktui diff --base
best`` and the comparison of a new version with earlier ones all use.

The best version is the one whose newest finished run passed with the highest speedup over the
reference (a version without a measured speedup, e.g. one only run on the CPU tier, is never
best); on a tie the newer version wins.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol, TypeVar


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
