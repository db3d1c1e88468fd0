"""A kernel that keeps saving its own files must not make ``ktui watch`` re-run it forever.

Confined (``ktui.worker.confine``), a kernel cannot write its source, its reference or a helper
module; unconfined (``KTUI_NO_CONFINE=1``, a kernel without Landlock) it can, and each such save
starts it again. An *echo* is a save of a file last written while an unconfined run of the kernel
was in flight (``UnconfinedRuns.could_have_written``): a file that run could have written. A save made
after the run ended — an agent writing its next version the moment it reads the verdict — is
never one: nothing a run starts outlives it. After
``LIMIT`` re-runs caused by echoes in a row, the next echo re-runs nothing and says why; any
other save of the kernel (the user's) ends the streak and runs it as always.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.protocol.events import RunFinished, RunStarted
from ktui.protocol.notices import QueueChanged, RerunsStopped

LIMIT = 3  # re-runs caused by a kernel's own saves, in a row, before it is stopped
# How early an unconfined run may have begun writing, before this process read its start: the
# worker's start event crosses a pipe first, and a file's stamp may lag its write by a tick
# (MTIME_TICK_S). Wider than the tick alone, so a write is never missed; the window's end uses the tick.
MTIME_SLACK_S = 0.05


def _mtime_tick() -> float:
    """How far a file's modification time may lag the wall clock: Linux stamps files from its coarse
    clock (one scheduler tick, 1-10 ms); elsewhere, a hundredth of a second."""
    try:
        return time.clock_getres(5)  # CLOCK_REALTIME_COARSE, which Python does not name
    except (AttributeError, OSError):
        return 0.01


MTIME_TICK_S = _mtime_tick()


@dataclass
class _Open:
    path: Path
    kernel: str
    since: float  # wall clock
    seen: int = 0  # the newest queue snapshot that showed it running


class UnconfinedRuns:
    """When each kernel's unconfined runs were in flight (wall clock), read from the run queue's
    events. It must hear them first (``RunQueue.follow(first=True)``): a run's end is marked
    before anyone who could save a file on reading its verdict hears of it. A confined run cannot
    write the workspace, and nothing a run started outlives it (the worker ends its tree before it
    says the run finished), so a file written after the run said so is someone's save."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}  # run id → the unconfined run in flight
        self._last: dict[Path, tuple[float, float]] = {}  # a kernel's last unconfined run: since, until

    def __call__(self, item) -> None:
        now = time.time()
        with self._lock:
            if isinstance(item, RunStarted):
                self._close([r for r, run in self._open.items() if run.path == Path(item.path)], now)  # the last one ended
                if item.confined is False:  # user code may write the workspace from now on; the start was read late
                    self._open[item.run_id] = _Open(Path(item.path), item.kernel, now - MTIME_SLACK_S)
            elif isinstance(item, RunFinished) and item.run_id in self._open:
                run = self._open.pop(item.run_id)
                self._last[run.path] = (run.since, now - MTIME_TICK_S)  # a save made on reading it is nobody's echo
            elif isinstance(item, QueueChanged):
                self._queue_changed(item, now)

    def _queue_changed(self, item: QueueChanged, now: float) -> None:
        """A run that ended with no ``run_finished`` (a consumer failed) ends when a snapshot newer
        than one that showed it running no longer does (snapshots may arrive out of order)."""
        running = {item.running, *item.also_running}
        ended = []
        for run_id, run in self._open.items():
            if run.kernel in running:
                run.seen = max(run.seen, item.seq)
            elif run.seen and item.seq > run.seen:
                ended.append(run_id)
        self._close(ended, now)

    def _close(self, run_ids: list[str], now: float) -> None:
        for run_id in run_ids:
            run = self._open.pop(run_id)
            self._last[run.path] = (run.since, now)

    def could_have_written(self, path: Path, written: float) -> bool:
        """Whether an unconfined run of the kernel at ``path`` was in flight when a file was last
        modified at ``written`` (wall clock)."""
        with self._lock:
            spans = [(run.since, float("inf")) for run in self._open.values() if run.path == path]
            if path in self._last:
                spans.append(self._last[path])
        return any(since <= written < until for since, until in spans)


class Echoes:
    """Counts each kernel's echoes in a row; touched from the watcher's thread only."""

    def __init__(self, root: Path, limit: int = LIMIT):
        self.root = Path(root)
        self.limit = limit
        self._streak: dict[Path, int] = {}

    def admit(self, kernel_id: str, kernel_path: Path, saved: Path, echo: bool) -> tuple[bool, RerunsStopped | None]:
        """Whether the save of ``saved`` re-runs the kernel; the notice when this echo stops it."""
        if not echo:
            self.forget(kernel_path)
            return True, None
        streak = self._streak.get(kernel_path, 0) + 1
        self._streak[kernel_path] = streak
        if streak <= self.limit:
            return True, None
        if streak > self.limit + 1:
            return False, None  # stopped already, and said so
        name = os.path.relpath(saved, self.root)
        message = (f"kernel {kernel_id} kept rewriting {name} during its own runs ({self.limit} re-runs in a row "
                   f"caused by no save of yours): stopped re-running it; save it to run again")
        return False, RerunsStopped(kernel_id, str(saved), message)

    def forget(self, kernel_path: Path) -> None:
        """The user saved or re-ran the kernel: its streak starts again."""
        self._streak.pop(kernel_path, None)
