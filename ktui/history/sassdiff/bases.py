"""Which stored version to diff a new one against: the previous passing one, the best, the pinned
baseline, or a version number.

A ``compiled`` version (CuTeDSL on the CPU tier: compiled and dumped, not run) is a base for
``previous``: its SASS is real and, on a machine without a GPU, no version of such a kernel ever
does more. It is never ``best``: nothing about it was timed (``ktui.history.best``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ktui.history.best import best_version
from ktui.history.sassdiff.model import NoBase
from ktui.protocol.events import finished_run

if TYPE_CHECKING:
    from ktui.history.store import Store

BASES = ("previous", "best", "pinned")
DIFFABLE = ("passed", "compiled")  # verdicts of a version ``previous`` may diff against


def resolve_base(store: Store, kernel: str, new_version: int, base: str) -> int:
    """The version to diff ``new_version`` against; raises ``NoBase`` with the reason when none fits."""
    versions = [v for v, _ in store.iter_versions(kernel)]
    if not versions:
        raise NoBase(f"{kernel} has no stored versions yet", cli="run `ktui run` on it first",
                     dashboard="it runs when saved, or press r")
    base = (base or "previous").strip()
    if base.isdigit():
        number = int(base)
        if number not in versions:
            raise NoBase(f"{kernel} has no version {number} (it has v{min(versions)}–v{max(versions)})")
        return number
    if base not in BASES:
        raise NoBase(f"unknown base {base!r}: expected previous, best, pinned or a version number")
    if base == "pinned":
        pinned = store.pinned(kernel)
        if pinned is None:
            raise NoBase(f"no baseline is pinned for {kernel}", cli="pin one with `ktui pin PATH VERSION` (or `b` in the dashboard)",
                         dashboard="b pins the selected version")
        return pinned

    runs = store.runs(kernel)  # newest first
    last_verdict: dict[int, str] = {}
    for run in runs:
        # A cancelled or interrupted re-run says nothing of the version.
        if finished_run(run.verdict):
            last_verdict.setdefault(run.version, run.verdict)
    if base == "previous":
        earlier = [v for v in versions if v < new_version]
        passing = [v for v in earlier if last_verdict.get(v) in DIFFABLE]
        if passing:
            return max(passing)
        if not earlier:
            raise NoBase(f"v{new_version} is the first version of {kernel}: there is nothing earlier to compare with")
        raise NoBase(f"none of the {len(earlier)} earlier version(s) of {kernel} passed (or only compiled) in its "
                     "last run",
                     cli="choose one with --base VERSION", dashboard="d cycles to best or pinned; b pins a version")
    newest = {}  # the newest finished run of each version: what "best" counts
    for run in runs:
        if finished_run(run.verdict):
            newest.setdefault(run.version, run)
    points = [_Point(v, r.verdict, r.summary.get("speedup") if isinstance(r.summary, dict) else None)
              for v, r in newest.items()]
    best = best_version(points, exclude=new_version)
    if best is None:
        raise NoBase(f"no other version of {kernel} passed with a measured speedup (benchmarks run only on a GPU)",
                     cli="use --base previous or a version number", dashboard="d cycles to previous or pinned")
    return best.version


@dataclass(frozen=True)
class _Point:
    version: int
    verdict: str
    speedup: float | None
