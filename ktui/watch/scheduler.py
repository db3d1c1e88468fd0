"""Which run happens next: one at a time, never two of one kernel, the newest content always.

Saves arrive from the watcher thread, key presses from the UI; runs happen here, in one thread
of their own, through a ``Session`` (so the store and ``.ktui/latest/`` see every event). Runs of
different kernels queue — the machine has one GPU — and a kernel saved while it runs has its
stale run cancelled (``Runner.cancel`` kills the worker's process group) and goes to the front of
the queue. The job snapshots the file when it starts, so whatever was saved last is what runs.

Background work (``submit_background``: the reference audits of ``ktui.watch.audits``) has the
lowest priority: it starts only when no run or task waits, and any submit pre-empts it — its
``cancel`` is set, it ends what it started, and it starts again from the beginning once the
queue is empty. It never shares the machine with a run, so never with a timed benchmark.
"""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from ktui.protocol.events import Event, RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.run.runner import WorkerStartError
from ktui.run.session import Session
from ktui.workspace.kernels import Kernel


@dataclass(frozen=True)
class Notice:
    """Something the watch loop says besides the loop's own events (JSON type ``watch_*``)."""

    type: ClassVar[str] = "watch_notice"

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class QueueChanged(Notice):
    type: ClassVar[str] = "watch_queue"
    running: str | None  # kernel id of the run in flight
    queued: tuple[str, ...] = ()  # kernel ids waiting, in order
    cancelling: bool = False  # the run in flight is stale and being cancelled
    background: str | None = None  # what background work is in flight ("auditing relu"), not a kernel's run


@dataclass(frozen=True)
class RunnerReady(Notice):
    """Where runs happen, known once the worker has started."""

    type: ClassVar[str] = "watch_device"
    tier: str
    device: str
    arch: str


@dataclass(frozen=True)
class JobProblem(Notice):
    """A job that could not run at all (file vanished, worker would not start)."""

    type: ClassVar[str] = "watch_error"
    kernel: str
    message: str


Listener = Callable[[Event | Notice], None]
# Runs a job other than the ladder (a profile) in the scheduler's thread; it reports through the
# listener and must return when ``cancelled`` is set.
Task = Callable[[Kernel, threading.Event], None]
# Background work: runs until done (returns True) or until ``cancel`` is set (returns False: it was
# pre-empted and runs again later). A False without ``cancel`` is not retried.
Background = Callable[[threading.Event], bool]
BACKGROUND = "background"


@dataclass
class _Entry:
    kind: str  # "run", a task name or BACKGROUND
    path: Path  # the kernel; for background work, what it is about (a reference)
    work: Background | None = field(default=None, compare=False)

    def key(self) -> tuple[str, Path]:
        return self.kind, self.path


@dataclass
class _Current:
    entry: _Entry
    kernel_id: str
    stale: bool = False  # saved again since this run's snapshot
    live: bool = False  # the worker has the job: cancelling now kills the right process
    cancel: threading.Event = field(default_factory=threading.Event)
    finished: bool = False  # background work that was not pre-empted


class Scheduler:
    def __init__(
        self,
        session: Session,
        options: Options,
        listener: Listener,
        resolve: Callable[[Path], Kernel | None],
        tasks: dict[str, Task] | None = None,
        warm_up: bool = True,
    ):
        self.session = session
        self.options = options
        self.listener = listener
        self.resolve = resolve
        self.tasks = tasks or {}
        self._queue: list[_Entry] = []
        self._background: list[_Entry] = []  # starts only when _queue is empty
        self._ids: dict[Path, str] = {}
        self._current: _Current | None = None
        self._cond = threading.Condition()
        self._stopping = False
        self._warm_up = warm_up
        self._thread = threading.Thread(target=self._main, name="ktui-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- asking for work (any thread) ----------------------------------------------------------
    def set_options(self, options: Options) -> None:
        """Swap in new options whole: a job reads them once, when it is prepared."""
        with self._cond:
            self.options = options

    def submit(self, kernel: Kernel, restart: bool = True) -> None:
        """Run ``kernel`` (its newest content). If it is running now and ``restart``, cancel that run."""
        self._enqueue(_Entry("run", kernel.path), kernel.id, restart)

    def submit_task(self, name: str, kernel: Kernel) -> None:
        if name not in self.tasks:
            raise KeyError(name)
        self._enqueue(_Entry(name, kernel.path), kernel.id, restart=False)

    def submit_background(self, path: Path, label: str, work: Background) -> None:
        """Queue low-priority ``work`` about ``path`` (once: a second submit while it waits or runs
        is dropped — the work reads what it needs when it starts)."""
        entry = _Entry(BACKGROUND, Path(path), work)
        with self._cond:
            current = self._current
            if self._stopping or (current is not None and current.entry.key() == entry.key()):
                return
            if all(e.key() != entry.key() for e in self._background):
                self._ids[entry.path] = label
                self._background.append(entry)
            self._cond.notify_all()

    def _enqueue(self, entry: _Entry, kernel_id: str, restart: bool) -> None:
        kill = False
        with self._cond:
            self._ids[entry.path] = kernel_id
            current = self._current
            if current is not None and current.entry.kind == BACKGROUND:
                current.cancel.set()  # pre-empted: a run never waits for background work
            if current is not None and current.entry.key() == entry.key():
                if not restart:
                    return
                current.stale = True
                current.cancel.set()
                kill = current.live and entry.kind == "run"
                self._queue = [e for e in self._queue if e.key() != entry.key()]
                self._queue.insert(0, entry)
            elif current is None and not self._queue and not self._stopping:
                # Idle: the job starts now. Hand it to the run thread directly, so the first
                # notice already says "running" (no "queued" in between while that thread wakes).
                self._current = _Current(entry, kernel_id)
            elif all(e.key() != entry.key() for e in self._queue):
                self._queue.append(entry)
            self._cond.notify_all()
        if kill:
            # LocalRunner.cancel may wait for its lock while a worker starts: never block the caller.
            threading.Thread(target=self.session.runner.cancel, name="ktui-cancel", daemon=True).start()
        self._notify_queue()

    def forget(self, path: Path) -> None:
        """A kernel file was removed: drop its queued work (a run in flight finishes or fails)."""
        with self._cond:
            self._queue = [e for e in self._queue if e.path != path]
            self._background = [e for e in self._background if e.path != path]
        self._notify_queue()

    def snapshot(self) -> QueueChanged:
        with self._cond:
            cur = self._current
            background = cur is not None and cur.entry.kind == BACKGROUND
            return QueueChanged(
                running=cur.kernel_id if cur and not background else None,
                queued=tuple(self._ids.get(e.path, e.path.stem) for e in self._queue),
                cancelling=bool(cur and cur.stale),
                background=cur.kernel_id if cur and background else None,
            )

    @property
    def idle(self) -> bool:
        with self._cond:
            return self._current is None and not self._queue

    def close(self, reason: str = "cancelled: the watch stopped") -> None:
        """Stop: the run in flight is cancelled with ``reason``; nothing queued runs."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            self._background.clear()
            current = self._current
            if current is not None:
                current.cancel.set()
            self._cond.notify_all()
        if current is not None and current.entry.kind != BACKGROUND:
            self.session.runner.cancel(reason)
        if self._thread.is_alive():
            self._thread.join(timeout=15)
        self.session.close()

    # -- the run thread ------------------------------------------------------------------------
    def _notify_queue(self) -> None:
        self._emit(self.snapshot())

    def _emit(self, item: Event | Notice) -> None:
        try:
            self.listener(item)
        except Exception:
            traceback.print_exc()

    def _main(self) -> None:
        if self._warm_up:
            self._describe()
        while True:
            with self._cond:
                while self._current is None and not self._queue and not self._background and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                handed = self._current is not None
                if not handed:
                    entry = self._queue.pop(0) if self._queue else self._background.pop(0)
                    self._current = _Current(entry, self._ids.get(entry.path, entry.path.stem))
                current = self._current
            if not handed:
                self._notify_queue()
            try:
                self._run(current)
            except WorkerStartError as exc:
                self._emit(JobProblem(current.kernel_id, str(exc)))
            except Exception as exc:
                detail = traceback.format_exc(limit=6)
                self._emit(JobProblem(current.kernel_id, f"ktui could not run this job: {exc!r}\n{detail}"))
            finally:
                with self._cond:
                    self._current = None
                    if (current.entry.kind == BACKGROUND and not current.finished and current.cancel.is_set()
                            and not self._stopping):
                        self._background.insert(0, current.entry)  # pre-empted: again once the runs are done
                self._notify_queue()

    def _describe(self) -> None:
        try:
            info = self.session.runner.describe()
        except WorkerStartError as exc:
            self._emit(JobProblem("", str(exc)))
            return
        self._emit(RunnerReady(tier=info.get("tier", "?"), device=info.get("device", "?"), arch=info.get("arch", "?")))

    def _run(self, current: _Current) -> None:
        if current.entry.kind == BACKGROUND:
            assert current.entry.work is not None
            current.finished = current.entry.work(current.cancel)
            return
        kernel = self.resolve(current.entry.path)
        if kernel is None:
            self._emit(JobProblem(current.kernel_id, f"{current.entry.path}: the file is gone or unreadable"))
            return
        if current.entry.kind != "run":
            self.tasks[current.entry.kind](kernel, current.cancel)
            return
        job = self.session.prepare(kernel, self.options)
        if current.cancel.is_set():
            return  # saved again while preparing: the newer content is already queued
        for event in self.session.events(job):
            if not isinstance(event, RunStarted) and not current.live:
                # The worker has the job from here on: a pending cancel can kill it now.
                with self._cond:
                    current.live = True
                    pending = current.cancel.is_set()
                if pending and not isinstance(event, RunFinished):
                    self.session.runner.cancel()
            self._emit(event)
