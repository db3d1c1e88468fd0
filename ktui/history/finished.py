"""Each version's finished runs, the newest first: what a reader of the history that needs more
than a version's verdict picks from (timed shapes, per-shape figures).

A version's verdict is its newest finished run's (``best.newest_per_version``); a run still going,
cancelled or interrupted says nothing of it (``protocol.events.finished_run``). The roofline chart
and the roofline comparison take the newest finished run that has what they draw.
"""

from __future__ import annotations

from collections.abc import Iterable

from ktui.history.best import S
from ktui.protocol.events import finished_run


def finished_by_version(runs: Iterable[S]) -> dict[int, list[S]]:
    """Each version's finished runs among ``runs`` (``Store.runs``: newest first), newest first."""
    found: dict[int, list[S]] = {}
    for run in runs:
        if finished_run(run.verdict):
            found.setdefault(run.version, []).append(run)
    return found
