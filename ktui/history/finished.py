"""What the history says of each version: its finished runs, the newest first — the one definition.

A version's verdict and figures are its newest finished run's (a run still going, cancelled or
interrupted says nothing of it: ``protocol.events.finished_run``); a reader that needs a run with
something more (timed shapes, per-shape figures) takes the newest finished one that has it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ktui.protocol.events import finished_run

if TYPE_CHECKING:  # only named: a reader of the history has imported it
    from ktui.history.store import RunRecord


def finished_by_version(runs: Iterable[RunRecord]) -> dict[int, list[RunRecord]]:
    """Each version's finished runs among ``runs`` (``Store.runs``: newest first), newest first."""
    found: dict[int, list[RunRecord]] = {}
    for run in runs:
        if finished_run(run.verdict):
            found.setdefault(run.version, []).append(run)
    return found


def newest_finished(runs: Iterable[RunRecord]) -> dict[int, RunRecord]:
    """Each version's newest finished run among ``runs`` (newest first): what the version's verdict is."""
    return {version: finished[0] for version, finished in finished_by_version(runs).items()}
