"""The history as the dashboard reads it: per version, its newest finished run's figures.

The panes draw ``VersionPoint``s; ``DashboardState`` fills a kernel's view from its newest
finished run (``history.best.newest_per_version``: the one definition). Both come from here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ktui.history.best import newest_per_version
from ktui.history.store import Store
from ktui.protocol.events import PASSED, finished_run


@dataclass(frozen=True)
class VersionPoint:
    """One version in the speedup history: its last finished run's verdict and figures."""

    version: int
    verdict: str
    speedup: float | None
    roofline: float | None  # the worst shape's fraction of its attainable time
    tier: str
    finished: float | None
    code: CodeFacts | None = None  # what its compiled code holds (the dumps rung), timed or not
    correct: tuple[int, int] | None = None  # correctness shapes passed, of all
    code_missing: str = ""  # why ``code`` is None: what its dumps rung said
    gpu: str = ""  # which GPU of the host ran it, where several were in use
    summary: dict[str, Any] = field(default_factory=dict)  # its run's summary: the per-shape roofline figures


@dataclass(frozen=True)
class CodeFacts:
    """One version's compiled code across its GPU functions, from the SASS the dumps rung read:
    the hungriest function's registers, and instructions and spill instructions summed."""

    registers: int | None
    instructions: int | None
    spills: int | None
    functions: int



def version_history(store: Store, kernel_id: str, limit: int = 500) -> list[VersionPoint]:
    """Per version, its newest finished run (cancelled and interrupted runs say nothing about a version)."""
    chosen = newest_per_version(store.runs(kernel_id, limit=limit))
    dumps = store.rung_results([run.run_id for run in chosen.values()], "dumps")
    points: dict[int, VersionPoint] = {}
    for run in chosen.values():
        speedup = run.summary.get("speedup")
        correct = run.summary.get("correct")
        points[run.version] = VersionPoint(
            version=run.version,
            verdict=run.verdict,
            speedup=float(speedup) if isinstance(speedup, (int, float)) and math.isfinite(speedup) else None,
            roofline=worst_fraction(run.summary),
            tier=run.tier,
            finished=run.finished,
            code=code_facts(dumps.get(run.run_id)),
            code_missing=code_missing(dumps.get(run.run_id)),
            correct=(int(correct[0]), int(correct[1])) if isinstance(correct, list) and len(correct) == 2 else None,
            gpu=run.gpu,
            summary=run.summary,
        )
    return [points[v] for v in sorted(points)]


def code_facts(dumps: dict[str, Any] | None) -> CodeFacts | None:
    """A version's ``CodeFacts`` from its dumps rung; None where the rung read no SASS (it failed,
    was skipped, or the code has no CUBIN to read)."""
    functions = ((dumps or {}).get("figures") or {}).get("functions") or {}
    usage = [f for f in functions.values() if isinstance(f, dict) and isinstance(f.get("registers"), int)]
    if not usage:
        return None

    def total(key: str) -> int | None:
        values = [f[key] for f in usage if isinstance(f.get(key), int)]
        return sum(values) if values else None

    return CodeFacts(registers=max(f["registers"] for f in usage), instructions=total("instructions"),
                     spills=total("spill_instructions"), functions=len(usage))


def code_missing(dumps: dict[str, Any] | None) -> str:
    """Why a version has no ``CodeFacts``, in a few words; "" when it has them."""
    if code_facts(dumps) is not None:
        return ""
    if dumps is None:
        return "its run stopped before the dumps rung"
    if dumps["status"] != "ok":
        return f"dumps {dumps['status'].replace('_', ' ')}: {dumps['message'].splitlines()[0] if dumps['message'] else ''}".rstrip(": ")
    return "its compiled code has no CUBIN to read registers from"


def worst_fraction(summary: dict[str, Any]) -> float | None:
    """The worst shape's fraction of its attainable time; None for a run without per-shape figures."""
    worst = summary.get("roofline_worst")
    value = worst.get("roofline") if isinstance(worst, dict) else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def compared_versions(points: list[VersionPoint]) -> tuple[VersionPoint, VersionPoint] | None:
    """The two newest passed versions with per-shape roofline figures (older, newer), to compare."""
    timed = [p for p in points if p.verdict == PASSED and p.roofline is not None]
    return (timed[-2], timed[-1]) if len(timed) >= 2 else None


def latest_finished(store: Store, kernel_id: str):
    """The kernel's newest run that says something about its version, or None."""
    for run in store.runs(kernel_id, limit=20):
        if finished_run(run.verdict):
            return run
    return None
