"""The workspace's daemon: one run queue, served on the owner's socket, to every caller.

``ktui serve`` runs it in a terminal; any command that needs a worker starts it in the background
(``ktui.dispatch.daemon``). It owns the workspace's GPUs and their warm workers, runs each
caller's kernels and sends that caller its own runs' events alone (``ktui.dispatch.owner``),
gives a profile or an audit its turn on the GPU, audits in its background the references its
callers' verdicts were judged against that no record covers (``ktui.dispatch.owner_audits``: they
exit at their verdicts), and hosts the views of ``ktui watch``: while one
view or more is attached it watches the files (one ``WatchLoop`` on its queue, whatever the number
of views: a second ``ktui watch`` is a second view, not a second runner) and sends every view
every event and notice, those of a run already in flight first.

Idle, it lets go of what it holds (``IdleLimits``): its workers after ``KTUI_WORKER_IDLE_S`` (600 s;
the GPU's memory with them), itself after ``KTUI_DAEMON_IDLE_S`` (900 s; a daemon started in the
background only); the workers' compile-ahead helpers go first (``KTUI_HELPERS_IDLE_S``, 120 s,
read by the worker). ``ktui serve --stop`` stops it, ``--status`` shows it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ktui.dispatch.owner import OwnerServer
from ktui.dispatch.owner_audits import OwnerAudits
from ktui.dispatch.placement import Placed
from ktui.dispatch.queue import RunQueue
from ktui.dispatch.session import Session
from ktui.protocol.events import Event, Output, RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.notices import RunnerReady, WatchStateChanged, WorkspaceNote
from ktui.protocol.owner import (
    DetachRequest,
    Message,
    OptionsRequest,
    OwnerStatus,
    OwnerStopping,
    RerunAllRequest,
    RerunRequest,
    StopRequest,
    TaskRequest,
    WatchRequest,
)
from ktui.protocol.processes import HELPERS_IDLE_ENV
from ktui.watch.loop import WatchLoop, WatchSettings
from ktui.watch.profile_task import profile_task
from ktui.workspace.folder import Workspace

WORKER_IDLE_ENV = "KTUI_WORKER_IDLE_S"
DAEMON_IDLE_ENV = "KTUI_DAEMON_IDLE_S"
GONE = "cancelled: the workspace's daemon stopped"
LAST_VIEW_LEFT = "cancelled: the last view of the watch went away"


@dataclass(frozen=True)
class IdleLimits:
    """How long the daemon keeps each thing it holds while nothing runs or calls (None: for ever)."""

    worker_s: float | None = 600.0  # a warm worker (and its GPU context): an agent's usual pause is shorter
    daemon_s: float | None = 900.0  # the daemon itself (no GPU context once its workers are gone)
    helpers_s: float = 120.0  # the worker's compile-ahead helpers (the worker ends them: ``HELPERS_IDLE_ENV``)

    @classmethod
    def from_env(cls, detached: bool) -> IdleLimits:
        """The limits ``KTUI_*_IDLE_S`` set; a daemon in a terminal (``ktui serve``) never ends itself."""
        return cls(worker_s=_seconds(WORKER_IDLE_ENV, cls.worker_s),
                   daemon_s=_seconds(DAEMON_IDLE_ENV, cls.daemon_s) if detached else None,
                   helpers_s=_seconds(HELPERS_IDLE_ENV, cls.helpers_s) or cls.helpers_s)


def _seconds(name: str, default: float | None) -> float | None:
    """``name``'s value in seconds; ValueError, in one line, for one that is not a positive number."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"{name} must be a number of seconds above 0, got {value!r}")
    return seconds


class Service:
    """The daemon's state: its queue and server, the views attached and the watch they share."""

    def __init__(self, root: Path, placed: Placed, server: OwnerServer, limits: IdleLimits, detached: bool,
                 log: str = "", say: Callable[[str], None] = print):
        self.root = Path(root).resolve()
        self.workspace = Workspace.at(self.root)
        self.placed = placed
        self.server = server
        self.limits = limits
        self.detached = detached
        self.log = log
        self.say = say
        options = Options(arch=placed.placement.arch, force_cpu=placed.placement.cpu)
        self.queue = RunQueue(Session(self.root, runner=placed.runner), options, self._heard,
                              resolve=self.workspace.kernel, runners=placed.runners)  # warm from its start
        who = "the workspace's daemon" if detached else "ktui serve"
        self.audits = OwnerAudits(self.queue, self._heard, f"{who} (pid {os.getpid()})")  # callers' first audits
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        self._views: list[Callable[[Any], None]] = []
        self._loop: WatchLoop | None = None
        self._in_flight: dict[str, list[Event]] = {}  # run id → its events so far: a new view sees them first
        self._last: dict[type, Any] = {}  # the last notice of each kind a new view needs (where runs happen, …)
        self._idle_since = time.monotonic()

    # -- the queue's events, to every view ------------------------------------------------------------
    def _heard(self, item: Any) -> None:
        with self._lock:
            if isinstance(item, RunStarted):
                self._in_flight[item.run_id] = [item]
            elif isinstance(item, Event) and not isinstance(item, Output) and item.run_id in self._in_flight:
                self._in_flight[item.run_id].append(item)
            if isinstance(item, RunFinished):
                self._in_flight.pop(item.run_id, None)
            if isinstance(item, (RunnerReady, WatchStateChanged, WorkspaceNote)):
                self._last[type(item)] = item
            views = list(self._views)
        for send in views:
            send(item)

    # -- the owner's socket: views, status, stop ------------------------------------------------------
    def attach(self, request: WatchRequest, lines: Iterator[Message], send: Callable[[Any], None]) -> None:
        """A view for as long as its connection lasts: the watch starts with the first and stops
        with the last; what it asks for (re-runs, a profile, strict mode) goes to the one watch."""
        with self._lock:
            self._views.append(send)
            first = self._loop is None
            if first:
                settings = WatchSettings.from_json(request.settings)
                self._loop = WatchLoop(self.workspace, Options(**request.options), self._heard, settings,
                                       tasks={"profile": profile_task}, queue=self.queue)
            replay = [*self._last.values(), *(e for run in self._in_flight.values() for e in run)]
            loop = self._loop
        for item in replay:
            send(item)
        send(self.queue.snapshot())
        if first:
            loop.start()
            self.server.save_grace_s = loop.save_grace_s  # a followed kernel's save is queued within it
        reason = "cancelled: the watch's view went away"
        try:
            for line in lines:
                if isinstance(line, DetachRequest):
                    reason = line.reason
                    break
                self._command(loop, line)
        finally:
            self._detach(send, reason)

    @staticmethod
    def _command(loop: WatchLoop, request: Message) -> None:
        if isinstance(request, RerunRequest):
            loop.rerun(Path(request.path))
        elif isinstance(request, RerunAllRequest):
            loop.rerun_all()
        elif isinstance(request, TaskRequest):
            loop.run_task(request.name, Path(request.path))
        elif isinstance(request, OptionsRequest):
            loop.set_options(Options(**request.options))

    def _detach(self, send: Callable[[Any], None], reason: str) -> None:
        with self._lock:
            if send in self._views:
                self._views.remove(send)
            loop = self._loop if not self._views else None
            if loop is not None:
                self._loop = None
                self._last.pop(WatchStateChanged, None)
        if loop is not None:
            self.server.save_grace_s = None  # saves run nothing any more
            loop.close(reason)  # the last view: the files are no longer watched, the watch's run is cancelled
            self._idle_since = time.monotonic()

    def views(self) -> int:
        with self._lock:
            return len(self._views)

    def busy(self) -> bool:
        """A run in flight or waiting, a view attached or a caller's run or turn being served."""
        return self.queue.pending() > 0 or self.views() > 0 or self.server.busy

    def status(self, status: OwnerStatus) -> OwnerStatus:
        status.daemon = self.detached
        status.serves_views = True
        status.views = self.views()
        status.idle_s = 0.0 if self.busy() else round(self.idle_s(), 1)
        status.idle_limits_s = {name: value for name, value in (("worker", self.limits.worker_s),
                                                                ("daemon", self.limits.daemon_s)) if value is not None}
        status.log = self.log
        return status

    def stop(self, request: StopRequest) -> OwnerStopping:
        """Stop now (its lock released before the answer goes out), or, ``if_idle``, only when idle."""
        if request.if_idle and self.busy():
            return OwnerStopping(stopped=False, message=f"busy: {self.queue.pending()} run(s), {self.views()} view(s)")
        self.say(f"stopping: {request.reason}")
        self.shutdown(f"cancelled: the workspace's daemon was stopped ({request.reason})")
        return OwnerStopping(stopped=True, message=request.reason)

    # -- its life ---------------------------------------------------------------------------------------
    def idle_s(self) -> float:
        """Seconds since anything last ran, called or watched, or was audited in the background
        (a caller's audit is not cut short by the daemon's idle end; a replacement may cut it: the
        next run hands it over again)."""
        if self.busy() or self.queue.background():
            self._idle_since = time.monotonic()
            return 0.0
        return min(time.monotonic() - self._idle_since, self.server.quiet_s)

    def serve(self) -> None:
        self.queue.start()
        self.server.host = self
        self.server.audits = self.audits
        self.server.serve(self.queue)

    def tick(self) -> None:
        """Let go of what idleness asks for: the workers, then the daemon itself."""
        idle = self.idle_s()
        if self.limits.worker_s is not None and idle >= self.limits.worker_s and self.queue.rest():
            self.say(f"idle {idle:.0f} s: its worker(s) ended (the next run starts a fresh one)")
        if self.limits.daemon_s is not None and idle >= self.limits.daemon_s:
            self.say(f"idle {idle:.0f} s: the daemon ends")
            self.shutdown(GONE)

    def shutdown(self, reason: str) -> None:
        """End everything, the lock last; again, nothing."""
        with self._lock:
            if self.stopped.is_set():
                return
            self.stopped.set()
            loop, self._loop = self._loop, None
        self.server.stop_accepting()
        try:
            if loop is not None:
                loop.close(reason)
            self.queue.close(reason)
            self.placed.close()
        finally:
            self.server.close()
