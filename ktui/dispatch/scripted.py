"""A runner that plays a script instead of running a kernel: no worker, no process, no user code.

It is a ``Runner`` like ``WorkerRunner`` (``describe``, ``run``, ``cancel``, ``close``), so the run
queue and its callers can be driven through restarts, cancels, pre-emption and crashes in
milliseconds. A script is the rungs a run reports, each after its own delay; a step of
``HANG`` seconds waits until the run is cancelled, and a run's verdict may be ``crashed`` (its
worker died). Every run it played is kept (``played``) with when it started and ended, so a test
can say which runs overlapped.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ktui.dispatch.runner import REPLACED, Runner
from ktui.protocol.events import CANCELLED, CRASHED, PASSED, Event, RunFinished, RungFinished, RungStarted, RunStarted
from ktui.protocol.job import Job

HANG = float("inf")  # a step that ends only when its run is cancelled
_PIDS = itertools.count(1)


@dataclass(frozen=True)
class Step:
    """One rung of a scripted run: reported ``status`` after ``seconds``."""

    rung: str
    seconds: float = 0.0
    status: str = PASSED
    message: str = ""
    until: threading.Event | None = None  # set: the step ends when this is set (or its run is cancelled), not by time


@dataclass(frozen=True)
class Script:
    steps: tuple[Step, ...] = (Step("correctness"),)
    verdict: str = PASSED
    message: str = ""


@dataclass
class Played:
    """One run the scripted runner played: what it was and when (``time.monotonic``)."""

    kernel: str
    run_id: str
    worker: int  # which scripted "worker" ran it: the same number while the runner stays warm
    started: float
    ended: float = 0.0
    verdict: str = ""
    options: Any = None


@dataclass
class ScriptedRunner(Runner):
    """Plays ``script(job)`` for each job (default: one passing rung at once)."""

    script: Callable[[Job], Script] = field(default=lambda job: Script())
    tier: str = "scripted"
    played: list[Played] = field(default_factory=list)
    confined: bool | None = None  # what its runs say of their confinement (None: not known)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._reason = REPLACED
        self._run_id = ""
        self._worker = next(_PIDS)
        self.closed = False

    def describe(self) -> dict[str, Any]:
        return {"tier": self.tier, "device": "script", "arch": "-", "confined": self.confined, "confinement": ""}

    @property
    def warm(self) -> bool:
        return not self.closed

    def cancel(self, reason: str = REPLACED, run_id: str | None = None) -> None:
        with self._lock:
            if run_id is not None and run_id != self._run_id:
                return
            self._reason = reason
            self._cancelled.set()

    def close(self) -> None:
        self.closed = True
        self._worker = next(_PIDS)  # a later run is a fresh worker's, as WorkerRunner's would be

    def _wait(self, step: Step) -> bool:
        """Play ``step``'s wait: True when the run was cancelled during it."""
        if step.until is None:
            return self._cancelled.wait(None if step.seconds == HANG else step.seconds)
        while not step.until.wait(0.005):
            if self._cancelled.is_set():
                return True
        return self._cancelled.is_set()

    def run(self, job: Job) -> Iterator[Event]:
        with self._lock:
            self.closed = False  # a run after ``close`` has a worker again
            self._run_id = job.run_id
            self._cancelled.clear()
        script = self.script(job)
        played = Played(job.kernel_id, job.run_id, self._worker, time.monotonic(), options=job.options)
        self.played.append(played)
        yield RunStarted(job.run_id, kernel=job.kernel_id, path=job.kernel_path, version=job.version,
                         content_hash=job.content_hash, reference=job.reference_path,
                         reference_hash=job.reference_hash, tier=self.tier, device="script", arch="-",
                         run_dir=job.run_dir, strict=job.options.strict, confined=self.confined)
        verdict, message = script.verdict, script.message
        try:
            for step in script.steps:
                yield RungStarted(job.run_id, rung=step.rung)
                if self._wait(step):
                    verdict, message = CANCELLED, self._reason
                    break
                yield RungFinished(job.run_id, rung=step.rung, status=step.status, message=step.message)
        finally:
            played.ended = time.monotonic()
        played.verdict = verdict
        if verdict in (CRASHED, CANCELLED):
            self._worker = next(_PIDS)  # its worker died or was killed: the next run gets a new one, as WorkerRunner's would
        yield RunFinished(job.run_id, verdict=verdict, message=message)
