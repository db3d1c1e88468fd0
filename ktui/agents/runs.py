"""The ``run`` tool's engine: a client of the run queue, progress out, cancellation in.

Runs go through the one run queue (``ktui.dispatch.queue``) exactly as ``ktui run``'s and the watch's
do: same sessions, store, reports and warm worker, which stays warm from one call to the next.
While another process owns the workspace's GPUs (a watch, ``ktui serve``) the runs go to its
queue over its socket (``ktui.dispatch.owner``); otherwise the server owns them from its first run on.
The queue runs in its own thread, so the server keeps answering while the ladder climbs; one call
at a time, as with one GPU. When the client cancels, the run in flight is cancelled (its worker's
process group is killed) and the call waits for the queue to see it end, so nothing the kernel
started outlives the call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ktui.agents.digest import run_digest
from ktui.agents.progress import RunProgress
from ktui.dispatch.owner import OwnerLink, OwnerServer, placement_words
from ktui.dispatch.queue import Batch, RunQueue
from ktui.dispatch.runner import LocalRunner, Runner, WorkerConfig
from ktui.dispatch.session import Session
from ktui.history.reports import build_report
from ktui.protocol.events import ERROR, Event, Output, RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.workspace.kernels import Kernel, state_dir

Progress = Callable[[float, float | None, str], Awaitable[None]]
POLL_S = 0.01  # how often a call looks for its runs' progress and end: a verdict waits at most this long
JOIN_AFTER_CANCEL_S = 60.0
CANCELLED_BY_CLIENT = "cancelled by the client: the worker's process group was killed"


@dataclass(frozen=True)
class Placement:
    """Where the server's runs happen: its runners (one per GPU) and that place in words."""

    runners: list[Runner]
    words: str


class RunService:
    """One server's client of the run queue; ``run`` is safe to call from several tool calls at once."""

    def __init__(self, config: WorkerConfig, root: Path, placement: Placement | None = None):
        self.config = config
        placement = placement or Placement([LocalRunner(config)], placement_words(cpu=config.force_cpu))
        self.runners = placement.runners
        self.runner = self.runners[0]
        self._events: queue.Queue[Event] = queue.Queue()  # the call in flight's, for its progress
        self._recorded: dict[str, list[dict[str, Any]]] = {}  # run id → its events, for its digest
        self._starts: dict[str, RunStarted] = {}
        self.root = root
        self.placement = placement.words
        self._queue: RunQueue | None = None  # made at the first call: the workspace's state is opened then
        self._server: OwnerServer | None = None  # while this server owns the workspace's GPUs
        self._link: OwnerLink | None = None  # the owner's, while a call runs there
        self._batch: Batch | None = None  # the call's runs in this server's own queue
        self._lock = anyio.Lock()

    @property
    def queue(self) -> RunQueue:
        if self._queue is None:
            options = Options(arch=self.config.arch, force_cpu=self.config.force_cpu,
                              allow_network=self.config.allow_network)  # each batch brings its own
            self._queue = RunQueue(Session(self.root, runner=self.runner), options, listener=self._heard, warm_up=False,
                                   runners=self.runners, owns_runners=False)  # closed by ``close``
            self._queue.start()
        return self._queue

    def _owner(self) -> OwnerLink | None:
        """The workspace's owner when it is another process; else this server becomes the owner."""
        if self._server is not None:
            return None
        state = state_dir(self.root)
        link = OwnerLink.connect(state)
        if link is None:
            self._server = OwnerServer.claim(state, self.queue, self.placement)
        return link

    def _heard(self, item) -> None:
        if isinstance(item, Event) and not isinstance(item, Output):
            self._recorded.setdefault(item.run_id, []).append(item.to_json())
            if isinstance(item, RunStarted):
                self._starts[item.run_id] = item
            self._events.put(item)

    def _digest(self, finished: RunFinished) -> dict[str, Any]:
        recorded = self._recorded.pop(finished.run_id, [])
        start = self._starts.pop(finished.run_id, None)
        if start is None:
            raise RuntimeError(f"{finished.run_id}: the run ended without its start")
        return run_digest(build_report(start, finished, recorded))

    def _work(self, kernels: list[Kernel], options: Options, results: list[dict[str, Any]]) -> None:
        done: set[Path] = set()
        try:
            if self._link is not None:
                for event in self._link.run([k.path for k in kernels], options, self.placement):
                    self._heard(event)
                    if isinstance(event, RunFinished):
                        results.append(self._digest(event))
                        done.add(Path(results[-1]["path"]))
                return
            for kernel, finished in self.queue.batch(kernels, options, handle=self._batch):
                done.add(kernel.path)
                results.append(self._digest(finished))
        except Exception as exc:
            for kernel in kernels:
                if kernel.path not in done:
                    results.append({"kernel": kernel.id, "path": str(kernel.path), "verdict": ERROR,
                                    "message": f"{type(exc).__name__}: {exc}", "first_failure": None})

    async def run(self, kernels: list[Kernel], options: Options, progress: Progress) -> list[dict[str, Any]]:
        if self._lock.locked():
            await progress(0, None, "waiting for the run in flight to finish")
        async with self._lock:
            results: list[dict[str, Any]] = []
            self._events = queue.Queue()  # this call's: nothing a cancelled call left is told as its progress
            told = RunProgress({k.path for k in kernels})
            self._link = self._owner()
            self._batch = Batch()
            if self._link is None:
                self.queue  # noqa: B018 -- opened here, in the caller's thread: a state it cannot write is its error
            thread = threading.Thread(target=self._work, args=(kernels, options, results), name="ktui-mcp-run",
                                      daemon=True)
            thread.start()
            try:
                while thread.is_alive() or not self._events.empty():
                    while True:
                        try:
                            event = self._events.get_nowait()
                        except queue.Empty:
                            break
                        note = told.note(event)
                        if note is not None:
                            await progress(*note)
                    await anyio.sleep(POLL_S)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    # cancel() may wait for a worker still starting up: off the event loop.
                    if self._link is not None:  # the owner runs what it accepted to its end
                        self._link.close()
                    else:
                        # Only this call's runs: other callers' runs in this server's queue go on.
                        await anyio.to_thread.run_sync(self.queue.cancel, CANCELLED_BY_CLIENT, self._batch)
                    await anyio.to_thread.run_sync(thread.join, JOIN_AFTER_CANCEL_S)
                raise
            finally:
                self._link = None
            return results

    def close(self) -> None:
        if self._server is not None:
            self._server.stop_accepting()
        if self._queue is not None:
            self._queue.close("cancelled: the MCP server stopped")
        for runner in self.runners:
            runner.close()
        if self._server is not None:
            self._server.close()

