"""The ``run`` tool's engine: the loop in the warm worker, progress out, cancellation in.

Runs go through ``Session`` exactly as ``ktui run`` does (same store, same reports, same worker
process), in a thread so the server keeps answering while the ladder climbs. One run at a time,
as with one GPU. When the client cancels, the worker's process group is killed
(``LocalRunner.cancel``) and the call waits for the thread to see the run end, so nothing the
kernel started outlives the call.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ktui.agents.digest import run_digest
from ktui.history.reports import build_report
from ktui.protocol.events import ERROR, Event, Output, RunFinished, RungFinished, RunStarted
from ktui.protocol.job import Options
from ktui.run.runner import LocalRunner, WorkerConfig
from ktui.run.session import Session
from ktui.workspace.kernels import Kernel

Progress = Callable[[float, str], Awaitable[None]]
POLL_S = 0.1
JOIN_AFTER_CANCEL_S = 60.0
CANCELLED_BY_CLIENT = "cancelled by the client: the worker's process group was killed"


@dataclass
class _Batch:
    """One ``run`` call: kernels in, one digest per kernel out, events passed to the caller as they come."""

    kernels: list[Kernel]
    options: Options
    runner: LocalRunner
    events: queue.Queue[Event] = field(default_factory=queue.Queue)
    results: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def work(self) -> None:
        sessions: dict[Path, Session] = {}
        try:
            for kernel in self.kernels:
                if self.stop.is_set():
                    break
                session = sessions.get(kernel.root)
                if session is None:
                    session = sessions[kernel.root] = Session(kernel.root, runner=self.runner)
                try:
                    self.results.append(self._one(session, kernel))
                except Exception as exc:
                    self.results.append({"kernel": kernel.id, "path": str(kernel.path), "verdict": ERROR,
                                         "message": f"{type(exc).__name__}: {exc}", "first_failure": None})
        finally:
            for session in sessions.values():
                session.store.close()  # the runner stays warm for the next call

    def _one(self, session: Session, kernel: Kernel) -> dict[str, Any]:
        job = session.prepare(kernel, self.options)
        start: RunStarted | None = None
        recorded: list[dict[str, Any]] = []
        for event in session.events(job):
            if isinstance(event, Output):
                continue
            self.events.put(event)
            if isinstance(event, RunStarted):
                start = event
            recorded.append(event.to_json())
            if isinstance(event, RunFinished) and start is not None:
                return run_digest(build_report(start, event, recorded))
        raise RuntimeError(f"{kernel.id}: the run ended without a verdict")


class RunService:
    """Owns the warm worker of one server; ``run`` is safe to call from several tool calls at once."""

    def __init__(self, config: WorkerConfig):
        self.config = config
        self.runner = LocalRunner(config)
        self._lock = anyio.Lock()

    async def run(self, kernels: list[Kernel], options: Options, progress: Progress) -> list[dict[str, Any]]:
        if self._lock.locked():
            await progress(0, "waiting for the run in flight to finish")
        async with self._lock:
            batch = _Batch(kernels, options, self.runner)
            thread = threading.Thread(target=batch.work, name="ktui-mcp-run", daemon=True)
            thread.start()
            done = 0
            try:
                while thread.is_alive() or not batch.events.empty():
                    while True:
                        try:
                            event = batch.events.get_nowait()
                        except queue.Empty:
                            break
                        message = _progress_line(event)
                        if message:
                            done += 1
                            await progress(done, message)
                    await anyio.sleep(POLL_S)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    batch.stop.set()
                    # cancel() may wait for a worker still starting up: off the event loop.
                    await anyio.to_thread.run_sync(self.runner.cancel, CANCELLED_BY_CLIENT)
                    await anyio.to_thread.run_sync(thread.join, JOIN_AFTER_CANCEL_S)
                raise
            return batch.results

    def close(self) -> None:
        self.runner.close()


def _progress_line(event: Event) -> str:
    if isinstance(event, RunStarted):
        return f"{event.kernel} v{event.version}: started ({event.tier} · {event.device})"
    if isinstance(event, RungFinished):
        line = event.message.splitlines()[0] if event.message else ""
        return f"[{event.rung}] {event.status}" + (f" — {line[:160]}" if line else "")
    if isinstance(event, RunFinished):
        return f"finished: {event.verdict}"
    return ""
