"""How a surface gets its runs: from the workspace's owner, or from a run queue of its own.

``open_runs`` is the one constructor of every surface that runs kernels on request (``ktui run``,
the MCP server): the workspace's daemon, started if need be (``ktui.dispatch.daemon``), or the
owner already there; with ``--no-daemon`` (and where no daemon may run: ``--remote``, ``--ray``,
a read-only workspace) a queue of its own on the placement's runners, which owns the workspace
while it lives and runs other callers' kernels too (``OwnerServer``), without telling this
surface of them. Either way a surface asks ``run`` for its kernels and reads back the events of
those runs alone, the verdicts among them; a ``run_finished`` whose summary says
``runs_again`` is not a verdict (its reference changed during it: ``RunQueue._run_again``).
"""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Callable, Iterator, Protocol

from ktui.dispatch.daemon import Reached, reach
from ktui.dispatch.owner import STOPPED_READING, OwnerGone, OwnerLink, OwnerServer, Refused
from ktui.dispatch.owner_audits import OwnerAudits
from ktui.dispatch.placement import Placed, Placement, RunnerSource, place, reached
from ktui.dispatch.queue import RUNS_AGAIN, Batch, RunQueue
from ktui.dispatch.session import Session
from ktui.protocol.events import Event, RunFinished
from ktui.protocol.job import Options
from ktui.protocol.owner import OwnerAuditing
from ktui.workspace.kernels import Kernel, state_dir


def is_verdict(event: Event) -> bool:
    """A ``run_finished`` that is its kernel's verdict (not one followed by a second run)."""
    return isinstance(event, RunFinished) and not event.summary.get(RUNS_AGAIN)


class Stream(Protocol):
    """One request's runs: iterate for their events; ``cancel`` (any thread) stops them."""

    def __iter__(self) -> Iterator[Event]: ...

    def cancel(self, reason: str) -> None: ...


class Runs(Protocol):
    def run(self, kernels: list[Kernel], options: Options, reference: Path | None = None) -> Stream: ...

    def hand_audits(self, kernels: list[Kernel], options: Options, reference: Path | None = None
                    ) -> OwnerAuditing | None:
        """Once the verdicts are out: the first audits of ``kernels``' references, handed to an owner
        that outlives this caller (what it took), or None when nothing here outlives it."""

    def close(self, reason: str, others: bool = True) -> None: ...


class OwnerRuns:
    """Runs made by the workspace's owner (its daemon, or another command that owns it)."""

    def __init__(self, link: OwnerLink, placement: Placement):
        self.link = link
        self.placement = placement

    def run(self, kernels: list[Kernel], options: Options, reference: Path | None = None) -> Stream:
        return self.link.run([k.path for k in kernels], options, self.placement, reference)

    def hand_audits(self, kernels: list[Kernel], options: Options, reference: Path | None = None
                    ) -> OwnerAuditing | None:
        """The owner's background takes them; None from one that ends with its command (or is gone)."""
        try:
            return self.link.audit([k.path for k in kernels], options, reference)
        except (Refused, OwnerGone):
            return None

    def close(self, reason: str, others: bool = True) -> None:
        """Nothing to end: the owner keeps its worker for the next caller."""


class QueueRuns:
    """Runs made here, by a run queue on the placement's runners; the workspace is this process's
    while it lives, and other callers' kernels run in the same queue. ``who``: a process that outlives
    its calls, in words ("the MCP server"): its queue then audits in its background the references
    its callers, and others', hand over (``OwnerAudits``); "": it ends with its command and takes none."""

    def __init__(self, root: Path, placed: Placed, who: str = ""):
        self.placed = placed
        options = Options(arch=placed.placement.arch, force_cpu=placed.placement.cpu)  # each request brings its own
        self.queue = RunQueue(Session(root, runner=placed.runner), options, listener=_unheard, warm_up=False,
                              runners=placed.runners)
        self.queue.start()
        self.server = OwnerServer.claim(state_dir(root), self.queue, placed.placement)  # None: another owns it
        self.audits = OwnerAudits(self.queue, _unheard, f"{who} (pid {os.getpid()})") if who else None
        if self.server is not None:
            self.server.audits = self.audits

    def run(self, kernels: list[Kernel], options: Options, reference: Path | None = None) -> Stream:
        return QueueStream(self.queue, kernels, options, reference)

    def hand_audits(self, kernels: list[Kernel], options: Options, reference: Path | None = None
                    ) -> OwnerAuditing | None:
        return self.audits.take(kernels, options) if self.audits is not None else None

    def close(self, reason: str, others: bool = True) -> None:
        """End the queue, its runners and the workspace's ownership; ``others``: the runs other
        callers asked for are let run to their end first (none is accepted from now on)."""
        try:
            if self.server is not None:
                self.server.stop_accepting()
                if others:
                    self.queue.wait_idle()
        finally:
            self.queue.close(reason)
            self.placed.close()  # a Ray pool's actors, and Ray when it started it
            if self.server is not None:
                self.server.close()  # the workspace is free once its runs have ended


def _unheard(item) -> None:
    """The queue's own listener: a surface reads its own runs' events from its ``Stream``."""


_END = object()


class QueueStream:
    """One request's runs in a queue of this process, their events read in the caller's thread."""

    def __init__(self, run_queue: RunQueue, kernels: list[Kernel], options: Options, reference: Path | None):
        self._queue = run_queue
        self._kernels = kernels
        self._options = options
        self._items: queue.Queue = queue.Queue()
        self._batch = Batch(heard=self._items.put, reference=reference)

    def _drive(self) -> None:
        try:
            for _ in self._queue.batch(self._kernels, self._options, handle=self._batch):
                pass
            self._items.put(_END)
        except BaseException as exc:  # raised in the caller's thread
            self._items.put(exc)

    def __iter__(self) -> Iterator[Event]:
        threading.Thread(target=self._drive, name="ktui-batch", daemon=True).start()
        try:
            while (item := self._items.get()) is not _END:
                if isinstance(item, BaseException):
                    raise item
                yield item
        except GeneratorExit:
            self.cancel(STOPPED_READING)  # nobody reads these runs any more (``ktui run | head -1``)
            raise

    def cancel(self, reason: str) -> None:
        self._queue.cancel(reason, self._batch)


def open_runs(root: Path, placement: Placement, daemon: bool = True, say: Callable[[str], None] = lambda line: None,
              session: bool = False, source: RunnerSource | None = None, who: str = "") -> Runs:
    """The runs of a surface in the workspace at ``root``: through its daemon (``daemon``: not
    ``--no-daemon``, ``ktui.dispatch.daemon.wanted``; on this host's workers), through the owner already there, else a queue of its own (``session``: a
    long-lived one whose worker may keep compile-ahead helpers, and which, given ``who``, audits
    the references its callers hand over in its background; ``source``: a test's runners).
    ``say`` is told the one line worth saying (a daemon replaced, why this runs on its own).
    ValueError, in one line, for a placement that cannot be made or reached."""
    state = state_dir(root)
    found = Reached(None)
    if daemon and placement.this_host and source is None:
        try:
            found = reach(root, state, placement)
        except OSError:
            found = Reached(None)  # a workspace whose state cannot be written has no daemon: one-shot
        if found.note:
            say(found.note)
    else:
        found = Reached(OwnerLink.connect(state))
    if found.link is not None:
        return OwnerRuns(found.link, placement)
    placed = place(placement, root, session=session, source=source)
    why = reached(placed)
    if why:
        raise ValueError(why)
    return QueueRuns(root, placed, who=who if session else "")
