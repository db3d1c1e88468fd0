"""The one shape of a run that never reached a worker (no reference, a syntax error, no worker
would start, the host or the actor was lost): a synthetic start and finish, so that the history,
the reports and every surface see it as they see any run."""

from __future__ import annotations

from typing import Any

from ktui.protocol.events import FAILED, ErrorInfo, Event, RunFinished, RungFinished, RunStarted, first_failure
from ktui.protocol.job import Job


def never_ran(job: Job, verdict: str, message: str, *, rung: str = "", error: ErrorInfo | None = None,
              device: str = "-", summary: dict[str, Any] | None = None, finish_message: str | None = None,
              ) -> list[Event]:
    """``job``'s run, started and ended with ``verdict`` for ``message``; with ``rung``, that rung
    failed with it (the pre-checks) and is its first failure; ``summary``: more of the finish's
    summary (where it would have run); ``finish_message``: the finish's own message when not ``message``."""
    events: list[Event] = [RunStarted(
        job.run_id, kernel=job.kernel_id, path=job.kernel_path, version=job.version, content_hash=job.content_hash,
        reference=job.reference_path, reference_hash=job.reference_hash, tier="-", device=device, arch="-",
        run_dir=job.run_dir, strict=job.options.strict)]
    if rung:
        events.append(RungFinished(job.run_id, rung=rung, status=FAILED, message=message, error=error))
        first = first_failure(rung, FAILED, message)
    else:
        first = {"rung": "", "status": verdict, "message": message.splitlines()[0] if message else ""}
    events.append(RunFinished(job.run_id, verdict=verdict, message=message if finish_message is None else finish_message,
                              summary={"first_failure": first, **(summary or {})}))
    return events
