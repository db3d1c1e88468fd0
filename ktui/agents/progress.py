"""The ``run`` tool's progress notifications: one per rung of this call's runs, with a total once known.

A note goes out when a run starts, at each rung's end and when it finishes. How many that makes
is known once a kernel's pre-checks have counted its shapes (the rung table, ``expected_rungs``):
the total is given from when every kernel of the call has been counted, and the last note of a
run brings its count to its total even when the ladder stopped early. Only this call's runs are
told: an event of another run (one cancelled before this call, another caller's on the same
queue) is not this call's progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ktui.protocol.events import Event, RunFinished, RungFinished, RunStarted
from ktui.protocol.rungs import expected_rungs

NOTES_AROUND = 2  # a run's start and its finish, beside one note per rung


@dataclass
class RunProgress:
    """``paths``: the kernel files this call runs."""

    paths: set[Path]
    done: int = 0
    _mine: set[str] = field(default_factory=set)  # run ids of this call's runs
    _expected: dict[str, int] = field(default_factory=dict)  # run id → its notes, once counted
    _told: dict[str, int] = field(default_factory=dict)  # run id → notes told

    def note(self, event: Event) -> tuple[float, float | None, str] | None:
        """``(progress, total, message)`` for ``event``, or None when it is not one of this call's notes."""
        if isinstance(event, RunStarted):
            if Path(event.path) not in self.paths:
                return None
            self._mine.add(event.run_id)
        elif event.run_id not in self._mine:
            return None
        message = _line(event)
        if not message:
            return None
        if isinstance(event, RungFinished) and event.rung == "pre-checks":
            tests, benches = event.figures.get("tests"), event.figures.get("benchmarks")
            if isinstance(tests, int) and isinstance(benches, int):
                self._expected[event.run_id] = expected_rungs(tests, benches) + NOTES_AROUND
        step = 1
        if isinstance(event, RunFinished):  # a ladder that stopped early: its remaining notes at once
            step = max(1, self._expected.get(event.run_id, 0) - self._told.get(event.run_id, 0))
            self._expected[event.run_id] = self._told.get(event.run_id, 0) + step
        self._told[event.run_id] = self._told.get(event.run_id, 0) + step
        self.done += step
        return self.done, self._total(), message

    def _total(self) -> float | None:
        if len(self._mine) < len(self.paths) or len(self._expected) < len(self._mine):
            return None
        return max(self.done, sum(self._expected.values()))


def _line(event: Event) -> str:
    if isinstance(event, RunStarted):
        return f"{event.kernel} v{event.version}: started ({event.tier} · {event.device})"
    if isinstance(event, RungFinished):
        line = event.message.splitlines()[0] if event.message else ""
        return f"[{event.rung}] {event.status}" + (f" — {line[:160]}" if line else "")
    if isinstance(event, RunFinished):
        return f"finished: {event.verdict}"
    return ""
