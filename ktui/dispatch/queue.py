"""The one run queue: which run happens next — one at a time per GPU, never two of one kernel,
the newest content always. Every surface drives it: the watch (saves, key presses, background
audits), ``ktui run`` and the MCP server (``batch``: kernels in, verdicts out as they finish).

Saves arrive from the watcher thread, key presses from the UI; runs happen here, in one thread
per runner (one runner per GPU: ``ktui.dispatch.pool``), through a ``Session`` (so the store and
``.ktui/latest/`` see every event). Runs of different kernels queue for the next free GPU, and a
kernel saved while it runs has its stale run cancelled (``Runner.cancel`` kills that worker's
process group, and only if that run is still the one in flight) and goes to the front of the
queue; no other GPU takes it before the stale run has ended. The job snapshots the file when it
starts, so whatever was saved last is what runs. Tasks (a profile) run on the first GPU only,
the one their own process sees first.

An entry carries the kernel and, when it has them, its own options (a batch's); a watch run
reads the queue's options when it starts. An entry a caller waits on (a batch's) is never
replaced, dropped for a newer save or cancelled by one: its caller gets that run's verdict. Two
callers share one run only when they asked for the same content (its hash when they asked), with
the same options; otherwise each run waits its turn. ``resolve`` reads a kernel afresh when its run starts
(its reference may have changed since the save); without it the entry's kernel runs as submitted.

Background work (``submit_background``: the reference audits of ``ktui.watch.background_audits`` and
those callers hand to the owner, ``ktui.dispatch.owner_audits``) has the
lowest priority: it starts only when no run or task waits or runs, and any submit pre-empts it —
its ``cancel`` is set, it ends what it started, and it starts again from the beginning once the
queue is empty. It never shares the machine with a run, so never with a timed benchmark.
"""

from __future__ import annotations

import enum
import queue
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from ktui.dispatch.runner import REPLACED, Runner
from ktui.dispatch.session import Consumer, Session
from ktui.dispatch.worker_protocol import WorkerStartError
from ktui.protocol.events import Event, RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.notices import JobProblem, Notice, QueueChanged, RunnerReady
from ktui.workspace.kernels import Kernel, ProblemError, content_hash, kernel_for

Listener = Callable[[Event | Notice], None]
# Runs a job other than the ladder (a profile) in the queue's thread; it reports through the
# listener and must return when ``cancelled`` is set.
Task = Callable[[Kernel, threading.Event], None]
# Background work: runs until done (returns True) or until ``cancel`` is set (returns False: it was
# pre-empted and runs again later). A False without ``cancel`` is not retried.
Background = Callable[[threading.Event], bool]
STOPPED = "cancelled: ktui stopped before this run finished"
RUNS_AGAIN = "runs_again"  # in a run_finished's summary: not its callers' verdict, a second run follows (``_run_again``)


class Kind(enum.Enum):
    """What a queue entry is."""

    RUN = "run"  # a kernel's ladder in a worker
    TASK = "task"  # a job other than the ladder on a kernel (a profile), on the first GPU
    TURN = "turn"  # another process's turn on the first GPU (a profile, an audit): work that waits for it to end
    BACKGROUND = "background"  # low-priority work (a reference's audit), pre-empted by anything else


class NoVerdict(RuntimeError):
    """A kernel a caller asked for ended without a verdict (the queue stopped, its file was removed)."""


class _Ended(NamedTuple):
    """A batch's entry is over (``why``: how it may have ended without a verdict)."""

    path: Path
    why: str


class Batch:
    """What one ``batch`` call waits on: each of its entries ends here, with a verdict or without;
    a caller that holds it can cancel that batch's runs alone (``RunQueue.cancel``)."""

    def __init__(self, heard: Callable[[Event], None] | None = None, reference: Path | None = None) -> None:
        self.items: queue.Queue[tuple[Kernel, RunFinished] | BaseException | _Ended] = queue.Queue()
        self.heard = heard  # each event of the batch's runs, as it comes (a caller over the owner's socket)
        self.reference = reference  # the one reference its kernels are judged against (``--reference``), if named

    def finished(self, kernel: Kernel, event: RunFinished) -> None:
        self.items.put((kernel, event))

    def failed(self, exc: BaseException) -> None:
        self.items.put(exc)

    def ended(self, path: Path, why: str) -> None:
        """The entry of the kernel at ``path`` is over; ``why`` it may have ended without a verdict."""
        self.items.put(_Ended(path, why))


@dataclass
class _Entry:
    kind: Kind
    path: Path  # the kernel's file; for background work, what it is about (a reference)
    task: str = ""  # a TASK's name (``RunQueue.tasks``)
    kernel: Kernel | None = field(default=None, compare=False)
    work: Background | None = field(default=None, compare=False)
    options: Options | None = field(default=None, compare=False)  # None: the queue's options when it starts
    again: bool = False  # a second run: its reference changed during the first
    batches: list[Batch] = field(default_factory=list, compare=False)  # the callers waiting on its verdict
    content: str | None = None  # a caller's entry: the kernel file's content hash when it asked

    def key(self) -> tuple[Kind, str, Path]:
        return self.kind, self.task, self.path

    def shares(self, other: _Entry) -> bool:
        """Whether ``other``, a caller's request, may take this entry's run as its own: the same
        kernel, the same content when asked (a hash that could be read), the same options."""
        return (self.key() == other.key() and self.content is not None and self.content == other.content
                and self.options == other.options and self.again == other.again)


@dataclass
class _Current:
    entry: _Entry
    kernel_id: str
    stale: bool = False  # saved again since this run's snapshot
    live: bool = False  # the worker has the job: cancelling now kills the right process
    cancel: threading.Event = field(default_factory=threading.Event)
    reason: str = REPLACED  # what a cancel of this run says
    run_id: str = ""  # the job the worker has (set with ``live``)
    finished: bool = False  # background work that was not pre-empted
    continued: bool = False  # its callers wait on a second run (its reference changed during this one)


class RunQueue:
    def __init__(
        self,
        session: Session,
        options: Options,
        listener: Listener,
        resolve: Callable[[Path], Kernel | None] | None = None,
        tasks: dict[str, Task] | None = None,
        warm_up: bool = True,
        runners: list[Runner] | None = None,
        consumers: list[Consumer] | None = None,
        owns_runners: bool = True,
    ):
        self.session = session
        self.runners: list[Runner] = list(runners or [session.runner])  # one per GPU, the session's first
        self.owns_runners = owns_runners  # False: whoever gave the runners closes them (the first: the session)
        self.options = options
        self.listener = listener
        self.resolve = resolve
        self.tasks = tasks or {}
        self._consumers = list(consumers or [])  # what the sessions of other workspaces hand events to
        self._followers: list[Listener] = []  # told everything the listener is (``follow``): callers over the owner's socket
        self._first: list[Listener] = []  # told before the listener (``follow(first=True)``): the watch's echo tracker
        self._sessions: dict[Path, Session] = {session.root: session}
        self._queue: list[_Entry] = []
        self._background: list[_Entry] = []  # starts only when _queue is empty
        self._ids: dict[Path, str] = {}
        self._again: set[Path] = set()  # kernels whose reference changed during their last run (Session.mark_again)
        self._seq = 0  # the last snapshot's number
        self._slots: list[_Current | None] = [None] * len(self.runners)  # what each runner runs now
        self._cond = threading.Condition()
        self._stopping = False
        self._warm_up = warm_up
        self._threads = [threading.Thread(target=self._main, args=(slot,), name=f"ktui-queue-{slot}", daemon=True)
                         for slot in range(len(self.runners))]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def _running(self) -> list[tuple[int, _Current]]:
        return [(slot, cur) for slot, cur in enumerate(self._slots) if cur is not None]

    # -- asking for work (any thread) ----------------------------------------------------------
    def set_options(self, options: Options) -> None:
        """Swap in new options whole: a job reads them once, when it is prepared."""
        with self._cond:
            self.options = options

    def submit(self, kernel: Kernel, restart: bool = True, reference: bool = False) -> None:
        """Run ``kernel`` (its newest content). If it is running now and ``restart``, cancel that run;
        ``reference``: what changed is its reference (or a file it needs), not the kernel."""
        self._enqueue(_Entry(Kind.RUN, kernel.path, kernel=kernel), kernel.id, restart, reference)

    def submit_task(self, name: str, kernel: Kernel) -> None:
        if name not in self.tasks:
            raise KeyError(name)
        self._enqueue(_Entry(Kind.TASK, kernel.path, task=name, kernel=kernel), kernel.id, restart=False)

    def submit_background(self, path: Path, label: str, work: Background) -> None:
        """Queue low-priority ``work`` about ``path`` (once: a second submit while it waits or runs
        is dropped — the work reads what it needs when it starts)."""
        entry = _Entry(Kind.BACKGROUND, Path(path), work=work)
        with self._cond:
            if self._stopping or any(cur.entry.key() == entry.key() for _, cur in self._running()):
                return
            if all(e.key() != entry.key() for e in self._background):
                self._ids[entry.path] = label
                self._background.append(entry)
            self._cond.notify_all()

    def submit_turn(self, label: str, work: Callable[[threading.Event], None]) -> None:
        """Give ``work`` the first GPU, in turn with the runs (before background work): it returns
        when the process it stands for is done with the GPU, or soon after ``cancel`` is set."""
        entry = _Entry(Kind.TURN, Path(f"{label} {id(work)}"), work=work)
        self._enqueue(entry, label, restart=False)

    def batch(self, kernels: list[Kernel], options: Options, heard: Callable[[Event], None] | None = None,
              handle: Batch | None = None) -> Iterator[tuple[Kernel, RunFinished]]:
        """Run ``kernels`` with ``options`` and yield each one's verdict as it finishes (in order on
        one GPU). A run that could not happen (its worker would not start, a consumer failed) is
        raised here, and ``NoVerdict`` at the end when a kernel ended without one. A run whose
        reference changed on disk during it (its recorded version judged it) runs once more against
        the new one: that second run's verdict is the kernel's. Stopping early (closing the
        iterator) drops what has not started and cancels what runs; ``heard``: told each event of
        these runs (in the queue's thread), besides the queue's listener; ``handle``: a ``Batch``
        the caller keeps to cancel these runs from another thread (its ``heard`` and ``reference``
        stand for the arguments)."""
        batch = handle or Batch(heard)
        for kernel in kernels:
            self._enqueue(_Entry(Kind.RUN, kernel.path, kernel=kernel, options=options, batches=[batch],
                                 content=_content(kernel.path)), kernel.id, restart=False)
        left = len(kernels)
        answered: set[Path] = set()
        missing: list[str] = []
        try:
            while left:
                item = batch.items.get()
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, _Ended):
                    left -= 1
                    if item.path not in answered:
                        missing.append(f"{item.path.name}: {item.why}")
                else:
                    answered.add(item[0].path)
                    yield item
        finally:
            if left:
                self.cancel(STOPPED, batch)
        if missing:
            raise NoVerdict("no verdict for " + "; ".join(missing))

    def cancel(self, reason: str, batch: Batch | None = None) -> None:
        """Drop the queued runs and cancel those in flight with ``reason`` (only ``batch``'s, when
        given); a run not yet in a worker never reaches one."""
        kills: list[tuple[Runner, str]] = []
        left: list[_Entry] = []  # entries other callers still wait on: ``batch`` leaves them, they run on
        with self._cond:
            ours = [e for e in self._queue if e.kind is Kind.RUN and (batch is None or batch in e.batches)]
            left = [e for e in ours if batch is not None and len(e.batches) > 1]
            dropped = [e for e in ours if e not in left]
            self._queue = [e for e in self._queue if e not in dropped]
            for slot, cur in self._running():
                if cur.entry.kind is not Kind.RUN or (batch is not None and batch not in cur.entry.batches):
                    continue
                if batch is not None and len(cur.entry.batches) > 1:
                    left.append(cur.entry)
                    continue
                cur.reason = reason
                cur.cancel.set()
                if cur.live:
                    kills.append((self.runners[slot], cur.run_id))
            if batch is not None:  # ``left`` holds entries only then
                for entry in left:
                    entry.batches.remove(batch)
            self._cond.notify_all()
        if batch is not None:
            for entry in left:
                batch.ended(entry.path, reason)
        for entry in dropped:
            _ended(entry, reason)
        for runner, run_id in kills:
            _cancel(runner, run_id, reason)
        self._notify_queue()

    def _enqueue(self, entry: _Entry, kernel_id: str, restart: bool, reference: bool = False) -> None:
        kill: tuple[Runner, str] | None = None
        with self._cond:
            if self._stopping:
                dropped = True
            else:
                dropped = False
                self._ids[entry.path] = kernel_id
                running = self._running()
                for _, cur in running:
                    if cur.entry.kind is Kind.BACKGROUND:
                        cur.cancel.set()  # pre-empted: a run never waits for background work
                same = next(((slot, cur) for slot, cur in running if cur.entry.key() == entry.key()), None)
                if entry.batches:
                    self._place_request(entry, kernel_id)
                else:
                    kill = self._place(entry, kernel_id, same, restart, reference)
                self._cond.notify_all()
        if dropped:
            _ended(entry, "ktui is stopping")
            return
        if kill is not None:
            # WorkerRunner.cancel may wait for its lock while a worker starts: never block the caller.
            runner, run_id = kill
            threading.Thread(target=_cancel, args=(runner, run_id), name="ktui-cancel", daemon=True).start()
        self._notify_queue()

    def _place_request(self, entry: _Entry, kernel_id: str) -> None:
        """A caller's entry (the lock held): it joins a queued run of the same content and options,
        else starts now on a free runner, else waits its turn; it never displaces another."""
        shared = next((e for e in self._queue if e.shares(entry)), None)
        free = self._free_slot(entry)
        if shared is not None:
            shared.batches.extend(entry.batches)
        elif free is not None and not self._queue:
            self._slots[free] = _Current(entry, kernel_id)  # idle: it starts now, the first notice says "running"
        else:
            self._queue.append(entry)

    def _place(self, entry: _Entry, kernel_id: str, same: tuple[int, _Current] | None, restart: bool,
               reference: bool) -> tuple[Runner, str] | None:
        """A save, a key press or a task (the lock held): one entry per kernel, the newest content
        first. Returns the run to kill: a stale one no caller waits on."""
        queued = next((i for i, e in enumerate(self._queue) if e.key() == entry.key()), None)
        if same is not None and restart:
            slot, current = same
            if reference and entry.kind is Kind.RUN:
                self._again.add(entry.path)  # its reference changed during the run: the next one is a second run
            # The newest content runs next: a queued entry reads it when it starts, so it moves up.
            self._queue.insert(0, self._queue.pop(queued) if queued is not None else entry)
            if current.entry.batches:
                return None  # a caller waits on the run in flight: it stands, with its verdict
            current.stale = True
            current.cancel.set()
            return (self.runners[slot], current.run_id) if current.live and entry.kind is Kind.RUN else None
        if same is not None:
            return None  # already running: the run in flight stands
        free = self._free_slot(entry)
        if free is not None and not self._queue:
            # Idle: the job starts now. Hand it to the run thread directly, so the first notice
            # already says "running" (no "queued" in between while that thread wakes).
            self._slots[free] = _Current(entry, kernel_id)
        elif queued is None:
            self._queue.append(entry)
        return None  # else the queued one stands: it reads the newest content when it starts

    def _free_slot(self, entry: _Entry) -> int | None:
        """The runner that may take ``entry`` now: a free one (a task: the first only), none while
        background work runs or ``entry``'s kernel still runs (a stale run being cancelled)."""
        if self._blocked(entry):
            return None
        slots = [0] if entry.kind not in (Kind.RUN, Kind.BACKGROUND) else range(len(self._slots))
        return next((slot for slot in slots if self._slots[slot] is None), None)

    def forget(self, path: Path) -> None:
        """A kernel file was removed: drop its queued work (a run in flight finishes or fails)."""
        with self._cond:
            dropped = [e for e in self._queue if e.path == path]
            self._queue = [e for e in self._queue if e.path != path]
            self._background = [e for e in self._background if e.path != path]
        for entry in dropped:
            _ended(entry, "its file was removed before its run")
        self._notify_queue()

    def snapshot(self) -> QueueChanged:
        with self._cond:
            running = [cur for _, cur in self._running()]
            runs = [cur.kernel_id for cur in running if cur.entry.kind is not Kind.BACKGROUND]
            background = next((cur.kernel_id for cur in running if cur.entry.kind is Kind.BACKGROUND), None)
            self._seq += 1
            return QueueChanged(
                running=runs[0] if runs else None,
                queued=tuple(self._ids.get(e.path, e.path.stem) for e in self._queue),
                cancelling=any(cur.stale for cur in running),
                background=background,
                also_running=tuple(runs[1:]),
                seq=self._seq,
            )

    def busy(self, path: Path) -> bool:
        """Whether a run of the kernel at ``path`` is queued or in flight: its verdict is coming."""
        key = (Kind.RUN, "", path)
        with self._cond:
            return any(e.key() == key for e in self._queue) or any(cur.entry.key() == key for _, cur in self._running())

    def follow(self, listener: Listener, first: bool = False) -> None:
        """Tell ``listener`` every event and notice from now on, besides the queue's own listener
        (in the thread that emits it: it must not block), until ``unfollow``; ``first``: before the
        listener and everyone else (what must know a run ended before anyone can act on it)."""
        with self._cond:
            (self._first if first else self._followers).append(listener)

    def unfollow(self, listener: Listener) -> None:
        with self._cond:
            for listeners in (self._first, self._followers):
                if listener in listeners:
                    listeners.remove(listener)

    @property
    def idle(self) -> bool:
        with self._cond:
            return not self._running() and not self._queue

    def wait_idle(self) -> None:
        """Return once nothing runs or waits (background work left out), or the queue stops."""
        with self._cond:
            while (self._queue or any(cur.entry.kind is not Kind.BACKGROUND for _, cur in self._running())) \
                    and not self._stopping:
                self._cond.wait()

    def pending(self) -> int:
        """Runs, tasks and turns in flight or queued (background work left out)."""
        with self._cond:
            return len(self._queue) + sum(cur.entry.kind is not Kind.BACKGROUND for _, cur in self._running())

    def background(self) -> int:
        """Background work queued or in flight (a reference's audit): what an idle owner still has to do."""
        with self._cond:
            return len(self._background) + sum(cur.entry.kind is Kind.BACKGROUND for _, cur in self._running())

    def rest(self) -> bool:
        """Let every runner's worker go while nothing runs or waits (an idle daemon frees the GPU's
        memory); the next run starts a fresh one. False, and nothing done, when something runs or waits."""
        with self._cond:  # held while closing: no run can start on a worker being let go
            if self._running() or self._queue or not any(runner.warm for runner in self.runners):
                return False
            for runner in self.runners:
                runner.close()
            return True

    def set_tasks(self, tasks: dict[str, Task]) -> None:
        """The tasks a ``submit_task`` may name from now on (a watch brings its profile task)."""
        with self._cond:
            self.tasks = dict(tasks)

    def cancel_unasked(self, reason: str) -> None:
        """Drop what no caller waits on (the watch's runs and tasks, background work) and cancel
        such a run in flight with ``reason``; callers' runs go on (a watch stopped while the
        daemon serves others)."""
        kills: list[tuple[Runner, str]] = []
        with self._cond:
            self._queue = [e for e in self._queue if e.batches or e.kind is Kind.TURN]
            self._background.clear()
            for slot, cur in self._running():
                if cur.entry.batches or cur.entry.kind is Kind.TURN:
                    continue
                cur.reason = reason
                cur.cancel.set()
                if cur.live and cur.entry.kind is Kind.RUN:
                    kills.append((self.runners[slot], cur.run_id))
            self._cond.notify_all()
        for runner, run_id in kills:
            _cancel(runner, run_id, reason)
        self._notify_queue()

    def close(self, reason: str = "cancelled: the watch stopped") -> None:
        """Stop: the run in flight is cancelled with ``reason``; nothing queued runs."""
        with self._cond:
            self._stopping = True
            dropped = list(self._queue)
            self._queue.clear()
            self._background.clear()
            running = self._running()
            for _, current in running:
                current.reason = reason
                current.cancel.set()
            self._cond.notify_all()
        for entry in dropped:
            _ended(entry, reason)
        for slot, current in running:
            if current.entry.kind is not Kind.BACKGROUND:
                self.runners[slot].cancel(reason)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=15)
        if self.owns_runners:
            for runner in self.runners[1:]:  # the first is the session's own, closed with it
                runner.close()
        for session in self._sessions.values():
            if session is not self.session:
                session.store.close()  # shares the first runner, closed below
        self.session.close()

    # -- the run thread ------------------------------------------------------------------------
    def _notify_queue(self) -> None:
        self._emit(self.snapshot())

    def _emit(self, item: Event | Notice) -> None:
        with self._cond:
            listeners = (*self._first, self.listener, *self._followers)
        for listener in listeners:
            try:
                listener(item)
            except Exception:
                traceback.print_exc()

    def _main(self, slot: int) -> None:
        if self._warm_up:
            self._describe(slot)
        while True:
            with self._cond:
                while True:
                    if self._stopping:
                        return
                    handed = self._slots[slot] is not None
                    if handed or self._take(slot):
                        break
                    self._cond.wait()
                current = self._slots[slot]
                assert current is not None
            if not handed:
                self._notify_queue()
            batches = current.entry.batches  # callers may join while it runs: read when it fails
            try:
                self._run(current, slot)
            except WorkerStartError as exc:
                for batch in list(batches):
                    batch.failed(exc)
                if not batches:
                    self._emit(JobProblem(current.kernel_id, str(exc)))
            except Exception as exc:
                for batch in list(batches):
                    batch.failed(exc)
                if not batches:
                    detail = traceback.format_exc(limit=6)
                    self._emit(JobProblem(current.kernel_id, f"ktui could not run this job: {exc!r}\n{detail}"))
            finally:
                with self._cond:
                    self._slots[slot] = None
                    if (current.entry.kind is Kind.BACKGROUND and not current.finished and current.cancel.is_set()
                            and not self._stopping):
                        self._background.insert(0, current.entry)  # pre-empted: again once the runs are done
                    self._cond.notify_all()  # another runner may take what waited for this one
                if not current.continued:
                    _ended(current.entry, current.reason if current.cancel.is_set() else "its run ended without one")
                self._notify_queue()

    def _blocked(self, entry: _Entry) -> bool:
        """Background work runs (it has the machine to itself), or ``entry``'s kernel still runs."""
        return any(cur.entry.kind is Kind.BACKGROUND or cur.entry.key() == entry.key() for _, cur in self._running())

    def _take(self, slot: int) -> bool:
        """Give runner ``slot`` the first queued entry it may run (the caller holds the lock), or
        background work when nothing runs or waits anywhere."""
        for i, entry in enumerate(self._queue):
            if not self._blocked(entry) and (entry.kind is Kind.RUN or slot == 0):
                self._slots[slot] = _Current(self._queue.pop(i), self._ids.get(entry.path, entry.path.stem))
                return True
        if self._background and not self._queue and not self._running():
            entry = self._background.pop(0)
            self._slots[slot] = _Current(entry, self._ids.get(entry.path, entry.path.stem))
            return True
        return False

    def _describe(self, slot: int) -> None:
        """Start runner ``slot``'s worker; the first one says where runs happen."""
        try:
            info = self.runners[slot].describe()
        except WorkerStartError as exc:
            self._emit(JobProblem("", str(exc)))
            return
        if slot == 0:
            gpus = tuple(r.gpu for r in self.runners)
            self._emit(RunnerReady(tier=info.get("tier", "?"), device=info.get("device", "?"), arch=info.get("arch", "?"),
                                   gpus=gpus if len(self.runners) > 1 else (), confined=info.get("confined"),
                                   confinement=info.get("confinement", "")))

    def _session(self, kernel: Kernel) -> Session:
        """The session of ``kernel``'s workspace (``ktui run`` may name kernels of several)."""
        root = Path(kernel.root).resolve()
        with self._cond:
            session = self._sessions.get(root)
            if session is None:
                session = self._sessions[root] = Session(root, runner=self.runners[0], consumers=self._consumers)
            return session

    def _run(self, current: _Current, slot: int) -> None:
        entry = current.entry
        if entry.kind in (Kind.BACKGROUND, Kind.TURN):
            assert entry.work is not None
            done = entry.work(current.cancel)
            current.finished = bool(done)
            return
        # A watch's entry is read afresh (its reference may have changed since the save); a
        # caller's runs the kernel it named, judged by the reference it named.
        kernel = self.resolve(entry.path) if self.resolve is not None and not entry.batches else entry.kernel
        if kernel is None:
            message = f"{entry.path}: the file is gone or unreadable"
            if entry.batches:
                raise FileNotFoundError(message)
            self._emit(JobProblem(current.kernel_id, message))
            return
        if entry.kind is Kind.TASK:
            self.tasks[entry.task](kernel, current.cancel)
            return
        if current.cancel.is_set():
            return  # cancelled before it started
        session = self._session(kernel)
        with self._cond:
            options = entry.options or self.options
        job = session.prepare(kernel, options)
        if current.cancel.is_set():
            return  # saved again while preparing: the newer content is already queued
        with self._cond:
            again = entry.again or entry.path in self._again
            self._again.discard(entry.path)
        if again:
            session.mark_again(job)
        runner = self.runners[slot]
        for event in session.events(job, runner=runner):
            changed = isinstance(event, RunFinished) and bool(event.summary.get("reference_changed"))
            if changed and not entry.batches:
                with self._cond:
                    self._again.add(entry.path)  # the watch's save of the reference runs it again
            again_next = changed and bool(entry.batches) and not entry.again
            if again_next:  # said to every listener: this is not the verdict its callers wait on
                event.summary = {**event.summary, RUNS_AGAIN: True}
            if not isinstance(event, RunStarted) and not current.live:
                # The worker has the job from here on: a pending cancel can kill it now.
                with self._cond:
                    current.live = True
                    current.run_id = job.run_id
                    pending = current.cancel.is_set()
                if pending and not isinstance(event, RunFinished):
                    _cancel(runner, job.run_id, current.reason)
            self._emit(event)
            with self._cond:
                batches = list(entry.batches)
            for batch in batches:
                if batch.heard is not None:
                    batch.heard(event)
            if again_next:
                self._run_again(current, kernel)
            elif isinstance(event, RunFinished):
                for batch in batches:
                    batch.finished(kernel, event)

    def _run_again(self, current: _Current, kernel: Kernel) -> None:
        """The rule for every caller: a run judged by a reference that changed on disk meanwhile
        does not stand; the kernel runs once more, first in the queue, against the new reference
        (read again as the caller named it), and that run's verdict is the callers'."""
        entry = current.entry
        try:
            kernel = kernel_for(entry.path, entry.batches[0].reference, kernel.root)
        except ProblemError as exc:
            for batch in list(entry.batches):
                batch.failed(NoVerdict(f"{kernel.id}: its reference changed during the run and cannot be read now: {exc}"))
            return
        again = _Entry(Kind.RUN, entry.path, kernel=kernel, options=entry.options, again=True,
                       batches=entry.batches, content=entry.content)
        with self._cond:
            current.continued = True  # its callers wait on the second run: this one ends without telling them
            self._queue.insert(0, again)
            self._cond.notify_all()


def _ended(entry: _Entry, why: str) -> None:
    for batch in entry.batches:
        batch.ended(entry.path, why)


def _content(path: Path) -> str | None:
    """The hash of the kernel file's content as a caller asks for it; None where it cannot be read."""
    try:
        return content_hash(path.read_bytes())
    except OSError:
        return None


def _cancel(runner: Runner, run_id: str, reason: str = REPLACED) -> None:
    """Cancel ``run_id`` on ``runner``, if it is still the run in flight there."""
    runner.cancel(reason, run_id=run_id)
