"""The watch loop: saves → affected kernels → scheduled runs → one stream for whoever listens.

``ktui watch`` has two faces, the dashboard and ``--headless`` (JSON lines); both are this loop
with a different listener. The listener receives the loop's events (``ktui.protocol.events``) and the
loop's notices (``ktui.protocol.notices``: saves, queue, watcher state, device, problems), from background
threads — a UI must hand them to its own thread. Each reference version is audited once, in the
background (``ktui.watch.background_audits``): its verdict is an ``audit_finished`` notice.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from watchdog.observers import Observer

from ktui.dispatch.owner import OwnerServer
from ktui.dispatch.owner_audits import OwnerAudits
from ktui.dispatch.placement import Placement
from ktui.dispatch.queue import Listener, RunQueue, Task
from ktui.dispatch.runner import Runner, WorkerConfig, WorkerRunner
from ktui.dispatch.session import Session
from ktui.history.current import is_current
from ktui.history.store import Store
from ktui.protocol.job import Options
from ktui.protocol.notices import Saved, WatchStateChanged, WorkspaceNote
from ktui.protocol.statedir import runs_folder
from ktui.watch.background_audits import BackgroundAudits
from ktui.watch.echoes import Echoes, UnconfinedRuns
from ktui.watch.watcher import DEFAULT_DEBOUNCE_S, Save, Watcher
from ktui.workspace.folder import KernelIndex, Workspace
from ktui.workspace.kernels import Kernel, name_problem

SAVE_GRACE_S = 2.0  # beyond the debounce: how long a save may take to be queued (the owner's followers wait that long)


@dataclass
class WatchSettings:
    debounce_s: float = DEFAULT_DEBOUNCE_S
    force_polling: bool = False
    catch_up: bool = True  # run kernels whose stored result is not for what is on disk
    audit: bool = True  # audit each reference version once, in the background (cached in .ktui/audits/)
    # Where its runs happen: set, the watch owns the workspace's GPUs while it runs
    # (``ktui.dispatch.owner``) and runs other commands' jobs too (a watch of its own, not a view).
    owner: Placement | None = None

    def to_json(self) -> dict[str, Any]:
        """What a view asks the daemon's watch for (``watch_request``): its owner is the daemon."""
        return {"debounce_s": self.debounce_s, "force_polling": self.force_polling, "catch_up": self.catch_up,
                "audit": self.audit}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchSettings:
        return cls(**{k: data[k] for k in ("debounce_s", "force_polling", "catch_up", "audit") if k in data})


class WatchLoop:
    """The workspace's files watched, their saves run through a run queue: its own (``runners``,
    one per GPU; a local worker when none), or the daemon's (``queue``), which it then shares with
    every other caller and leaves running when it closes."""

    def __init__(
        self,
        workspace: Workspace,
        options: Options,
        listener: Listener,
        settings: WatchSettings | None = None,
        runners: list[Runner] | None = None,
        tasks: dict[str, Callable[[WatchLoop], Task]] | None = None,
        observer_factory=Observer,
        queue: RunQueue | None = None,
    ):
        self.workspace = workspace
        self.options = options
        self.listener = listener
        self.settings = settings or WatchSettings()
        made = {name: make(self) for name, make in (tasks or {}).items()}
        self._owns_queue = queue is None
        if queue is None:
            runs = (str(runs_folder(workspace.root)),)  # where its worker may write, from its start
            runners = runners or [WorkerRunner(WorkerConfig(arch=options.arch, force_cpu=options.force_cpu,
                                                           writable=runs, readable=(str(workspace.root),),
                                                           allow_network=options.allow_network,
                                                           compile_ahead=True))]
            queue = RunQueue(Session(workspace.root, runner=runners[0]), options, listener, resolve=workspace.kernel,
                             tasks=made, runners=runners)
        else:
            queue.set_options(options)
            queue.set_tasks(made)
        self.queue = queue
        self.session = queue.session
        self.unconfined = UnconfinedRuns()  # when a run could have written a saved file (``ktui.watch.echoes``)
        self.audits = BackgroundAudits(self.queue, listener, workspace.kernel, options) if self.settings.audit else None
        self.owner: OwnerServer | None = None  # while it owns the workspace's GPUs
        self.index = KernelIndex(workspace)  # touched only from the watcher's thread after start
        self.echoes = Echoes(workspace.root)  # kernels that keep saving their own files
        self.gone = threading.Event()  # never set: a loop of this process stops only when closed (``WatchView``'s may)
        self.watcher = Watcher(
            workspace.watch_folders(), self._on_saves, debounce_s=self.settings.debounce_s,
            force_polling=self.settings.force_polling, observer_factory=observer_factory,
            on_state=lambda state: listener(WatchStateChanged(state.mode, state.reason, state.folders)),
        )

    @property
    def store(self) -> Store:
        return self.session.store

    def start(self) -> None:
        problem = self.workspace.problem()
        if problem:
            self.listener(WorkspaceNote(problem))
        kernels = self.index.kernels()  # read before the watcher's thread owns the index
        self.queue.follow(self.unconfined, first=True)
        if self._owns_queue:
            self.queue.start()
        if self.settings.owner is not None:
            self.owner = OwnerServer.claim(self.session.state, self.queue, self.settings.owner,
                                           save_grace_s=self.save_grace_s)
            if self.owner is not None:  # it outlives the commands it serves: their first audits are its
                self.owner.audits = OwnerAudits(self.queue, self.listener, f"ktui watch (pid {os.getpid()})")
        self.watcher.start()
        if self.settings.catch_up:
            for kernel in kernels:
                if not is_current(self.store, kernel):
                    self.queue.submit(kernel, restart=False)
        self._audit(kernels)  # after the catch-up runs: an audit waits for them

    @property
    def save_grace_s(self) -> float:
        """Within how many seconds a save is queued (the owner's followers wait that long)."""
        return self.settings.debounce_s + SAVE_GRACE_S

    def close(self, reason: str = "cancelled: the watch stopped") -> None:
        """Stop watching; the watch's run in flight is cancelled with ``reason``. Its own queue
        closes; the daemon's goes on serving its other callers."""
        self.watcher.stop()
        if self.owner is not None:
            self.owner.stop_accepting()
        if self._owns_queue:
            self.queue.close(reason)
        else:
            self.queue.cancel_unasked(reason)
            self.queue.set_tasks({})
        self.queue.unfollow(self.unconfined)
        if self.owner is not None:
            self.owner.close()

    # -- from the UI / a script ----------------------------------------------------------------
    def set_options(self, options: Options) -> None:
        """The options for runs that start from now on (the running one keeps its own)."""
        self.options = options
        self.queue.set_options(options)

    def rerun(self, path: Path) -> bool:
        kernel = self.workspace.kernel(Path(path))
        if kernel is None:
            return False
        self.echoes.forget(kernel.path)
        self.queue.submit(kernel, restart=True)
        return True

    def rerun_all(self) -> int:
        kernels = self.workspace.kernels()
        for kernel in kernels:
            self.queue.submit(kernel, restart=False)
        return len(kernels)

    def run_task(self, name: str, path: Path) -> bool:
        kernel = self.workspace.kernel(Path(path))
        if kernel is None:
            return False
        self.queue.submit_task(name, kernel)
        return True

    # -- from the watcher thread ---------------------------------------------------------------
    def _on_saves(self, saves: list[Save]) -> None:
        for save in saves:
            if name_problem(save.path):  # no kernel by that name: said, not run
                if not save.removed:
                    self.listener(WorkspaceNote(name_problem(save.path)))
                continue
            if save.removed and not self.workspace.is_reference_file(save.path) and save.path.suffix == ".py":
                # A kernel file (or a module beside one) is gone: listeners drop it by its path.
                self.queue.forget(save.path)
                self.index.affected_by(save.path)  # drops it from the index
                self.listener(Saved(str(save.path), (), None, dependency=False))
                continue
            affected = self.index.affected_by(save.path)
            dependency = all(k.path != save.path for k in affected)
            self.listener(Saved(str(save.path), tuple(k.id for k in affected), save.content_hash, dependency))
            for kernel in affected:
                echo = self.unconfined.could_have_written(kernel.path, _modified(save.path))
                rerun, stopped = self.echoes.admit(kernel.id, kernel.path, save.path, echo)
                if stopped is not None:
                    self.listener(stopped)
                if rerun:
                    self.queue.submit(kernel, restart=True, reference=kernel.path != save.path)
            self._audit(affected)

    def _audit(self, kernels: list[Kernel]) -> None:
        if self.audits is not None:
            for kernel in kernels:
                self.audits.request(kernel)


def _modified(path: Path) -> float:
    """When ``path`` was last written (wall clock); -1 once it is gone (no run wrote what is not there)."""
    try:
        return path.stat().st_mtime
    except OSError:
        return -1.0
