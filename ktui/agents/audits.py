"""The ``audit`` tool's engine: ``ktui audit``'s checks of a reference, progress out, cancellation in.

A kernel that passes a weak test has proved nothing, so an agent asks, as ``ktui audit`` does,
whether the reference tells a right kernel from a trivial one (zeros, a copy of an input, one
constant) and whether the reference itself is sound (moved by its seed and by every input, not
all zeros). The checks run in the audit's own process (``Auditor``: user code never runs in the
server), one call at a time; the verdict is cached per reference version in ``.ktui/audits/``,
the same cache ``ktui run`` reads to say ``weak test``. Cancelling kills the audit process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from ktui.dispatch.auditor import STRONG, WEAK, AuditOptions, Auditor, AuditTarget
from ktui.dispatch.first_audit import short_reason
from ktui.dispatch.worker_protocol import WorkerStartError
from ktui.protocol.events import Event, RunFinished, RungFinished
from ktui.workspace.kernels import ProblemError

Progress = Callable[[float, str], Awaitable[None]]
POLL_S = 0.1
JOIN_AFTER_CANCEL_S = 60.0


def digest(target: AuditTarget, events: list[Event], error: str = "") -> dict[str, Any]:
    """One reference's audit as an agent reads it: the verdict, each weakness named, every check."""
    finish = next((e for e in reversed(events) if isinstance(e, RunFinished)), None)
    summary = finish.summary if finish is not None else {}
    verdict = finish.verdict if finish is not None and not error else "error"
    reasons = list(summary.get("reasons") or [])
    return {
        "reference": str(target.reference),
        "name": target.name,
        "verdict": verdict,
        "weak": [short_reason(r) for r in reasons],
        "reasons": reasons,
        "message": error or (finish.message if finish is not None and verdict not in (STRONG, WEAK) else ""),
        "checks": [{"check": e.rung, "status": e.status, "message": e.message}
                   for e in events if isinstance(e, RungFinished)],
        "notes": list(summary.get("partial") or []),
        "fresh_seeds": list(summary.get("fresh_seeds") or []),  # weak only on ktui's fresh seeds: ktui's, not the test's
        "cached": bool(summary.get("cached")),
        "duration_s": finish.duration_s if finish is not None else 0.0,
    }


class AuditService:
    """Audits one call's references one after another, in a thread, in a fresh audit process."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()

    async def audit(self, targets: list[AuditTarget], options: AuditOptions, progress: Progress) -> list[dict[str, Any]]:
        if self._lock.locked():
            await progress(0, "waiting for the audit in flight to finish")
        async with self._lock:
            auditor = Auditor(options)
            events: queue.Queue[tuple[AuditTarget, Event]] = queue.Queue()
            results: list[dict[str, Any]] = []
            thread = threading.Thread(target=_work, args=(auditor, targets, events, results), daemon=True,
                                      name="ktui-mcp-audit")
            thread.start()
            done = 0
            try:
                while thread.is_alive() or not events.empty():
                    while True:
                        try:
                            target, event = events.get_nowait()
                        except queue.Empty:
                            break
                        if isinstance(event, (RungFinished, RunFinished)):
                            done += 1
                            await progress(done, _progress_line(target, event))
                    await anyio.sleep(POLL_S)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(auditor.cancel)
                    await anyio.to_thread.run_sync(thread.join, JOIN_AFTER_CANCEL_S)
                raise
            return results


def _work(auditor: Auditor, targets: list[AuditTarget], out: queue.Queue, results: list[dict[str, Any]]) -> None:
    try:
        for target in targets:
            seen: list[Event] = []
            error = ""
            try:
                for event in auditor.audit(target):
                    seen.append(event)
                    out.put((target, event))
            except (WorkerStartError, ProblemError, OSError) as exc:
                error = str(exc)
            results.append(digest(target, seen, error))
    finally:
        auditor.close()


def _progress_line(target: AuditTarget, event: Event) -> str:
    name = Path(target.reference).name
    if isinstance(event, RungFinished):
        line = event.message.splitlines()[0] if event.message else ""
        return f"{name} [{event.rung}] {event.status}" + (f" — {line[:160]}" if line else "")
    assert isinstance(event, RunFinished)
    return f"{name}: {event.verdict}"
