"""The ``run`` tool's engine: a client of the run queue, progress out, cancellation in.

Runs go through the one run queue (``ktui.dispatch.queue``) exactly as ``ktui run``'s and the watch's
do, reached through ``ktui.dispatch.runs.open_runs``: the workspace's daemon (started if need
be), whose warm worker stays warm from one call to the next and is shared with ``ktui run`` and
``ktui watch``; the owner already there; or, with ``--no-daemon``, a queue of this server's own,
which owns the workspace from its first run on and, outliving its calls, audits in its background
the references they hand over (``hand_audits``). A call reads back its own runs alone. The queue
runs in its own thread, so the server keeps answering while the ladder climbs; one call at a
time, as with one GPU. When the client cancels, the call's runs are cancelled (the worker's
process group is killed) and the call waits for them to end, so nothing the kernel started
outlives the call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from ktui.agents.digest import run_digest
from ktui.agents.progress import RunProgress
from ktui.dispatch.placement import Placement, RunnerSource
from ktui.dispatch.runs import QueueRuns, Runs, Stream, is_verdict, open_runs
from ktui.history.reports import build_report
from ktui.protocol.events import ERROR, Event, Output, RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.owner import OwnerAuditing
from ktui.workspace.kernels import Kernel

Progress = Callable[[float, float | None, str], Awaitable[None]]
POLL_S = 0.01  # how often a call looks for its runs' progress and end: a verdict waits at most this long
JOIN_AFTER_CANCEL_S = 60.0
CANCELLED_BY_CLIENT = "cancelled by the client: the worker's process group was killed"
SERVER = "the MCP server"  # who audits in its background with a queue of its own


class RunService:
    """One server's client of the run queue; ``run`` is safe to call from several tool calls at once."""

    def __init__(self, root: Path, placement: Placement | None = None, daemon: bool = True,
                 source: RunnerSource | None = None, runs: QueueRuns | None = None, allow_network: bool = False):
        self.root = root
        self.allow_network = allow_network  # ``--allow-network``: every run's kernels may use the network
        self.placement = placement or Placement()
        self.daemon = daemon
        self.source = source
        self.notes: list[str] = []  # what reaching the daemon had to say (a daemon replaced, why one-shot)
        self._events: queue.Queue[Event] = queue.Queue()  # the call in flight's, for its progress
        self._recorded: dict[str, list[dict[str, Any]]] = {}  # run id → its events, for its digest
        self._starts: dict[str, RunStarted] = {}
        self._own: QueueRuns | None = runs  # a queue of this server's own, kept from call to call
        self._stream: Stream | None = None  # the call in flight's runs
        self._lock = anyio.Lock()

    def _runs(self) -> Runs:
        """The daemon's (reached afresh each call: it may have ended, idle), or this server's own queue."""
        if self._own is not None:
            return self._own
        runs = open_runs(self.root, self.placement, daemon=self.daemon, say=self.notes.append, session=True,
                         source=self.source, who=SERVER)
        if isinstance(runs, QueueRuns):
            self._own = runs
        return runs

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

    def _work(self, stream: Stream, kernels: list[Kernel], results: list[dict[str, Any]]) -> None:
        done: set[Path] = set()
        try:
            for event in stream:
                self._heard(event)
                if is_verdict(event):
                    results.append(self._digest(event))
                    done.add(Path(results[-1]["path"]))
                elif isinstance(event, RunFinished):  # not its verdict: a second run follows
                    self._recorded.pop(event.run_id, None)
                    self._starts.pop(event.run_id, None)
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
            # Reaching the daemon may start it (a Python start): off the event loop.
            runs = await anyio.to_thread.run_sync(self._runs)
            stream = runs.run(kernels, options)
            thread = threading.Thread(target=self._work, args=(stream, kernels, results), name="ktui-mcp-run",
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
                    # Only this call's runs: other callers' runs go on. cancel() may wait for a
                    # worker still starting up: off the event loop.
                    await anyio.to_thread.run_sync(stream.cancel, CANCELLED_BY_CLIENT)
                    await anyio.to_thread.run_sync(thread.join, JOIN_AFTER_CANCEL_S)
                raise
            return results

    def hand_audits(self, kernels: list[Kernel], options: Options, reference: Path | None = None
                    ) -> OwnerAuditing | None:
        """Off the event loop, once a call's verdicts are out: the first audits of ``kernels``'
        references, handed to the workspace's owner or to this server's own queue, which both outlive
        the call (what was taken); None when no one takes them."""
        try:
            return self._runs().hand_audits(kernels, options, reference)
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        if self._own is not None:
            self._own.close("cancelled: the MCP server stopped", others=False)

