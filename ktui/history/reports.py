"""Files an agent reads: ``<run_dir>/report.json`` and ``.ktui/latest/<kernel>.json``.

A consumer of the event stream. When a run finishes it writes the run's whole event list as a
report next to its dumps, and the newest verdict of the kernel to ``.ktui/latest/<kernel>.json``
— atomically (write to a temp file, then rename) so a reader never sees half a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ktui.protocol.events import CANCELLED, Event, Output, RunFinished, RunStarted
from ktui.protocol.files import write_atomic
from ktui.protocol.statedir import OUTPUT_FILE, latest_report

OUTPUT_LINES = 5000  # of a run's printed output kept in its output.txt
OUTPUT_CHARS = 1_000_000  # and at most this many characters: one printed line can be a whole tensor


class ReportWriter:
    """Collects each run's events; on ``run_finished`` writes its report and the latest file."""

    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir)
        self._runs: dict[str, list[dict[str, Any]]] = {}
        self._started: dict[str, RunStarted] = {}
        self._printed: dict[str, list[str]] = {}
        self._printed_chars: dict[str, int] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, Output):
            # printed text is not part of the report: it goes to the run's output.txt
            self._keep_printed(event)
            return
        if isinstance(event, RunStarted):
            self._runs[event.run_id] = []
            self._started[event.run_id] = event
        events = self._runs.get(event.run_id)
        if events is None:
            return
        events.append(event.to_json())
        if isinstance(event, RunFinished):
            start = self._started.pop(event.run_id)
            self._runs.pop(event.run_id)
            report = build_report(start, event, events)
            text = json.dumps(report, indent=2, default=str)
            write_atomic(Path(start.run_dir) / "report.json", text)
            printed = self._printed.pop(event.run_id, None)
            self._printed_chars.pop(event.run_id, None)
            if printed:
                write_atomic(Path(start.run_dir) / OUTPUT_FILE, "\n".join(printed) + "\n")
            if event.verdict != CANCELLED:
                # A cancelled run says nothing about the kernel (a newer save replaced it): the
                # latest file keeps the newest real verdict until the replacement finishes.
                write_atomic(latest_path(self.state_dir, start.kernel), text)


    def _keep_printed(self, event: Output) -> None:
        """The first lines and characters of what the run printed; one line says where it was cut."""
        lines = self._printed.setdefault(event.run_id, [])
        used = self._printed_chars.get(event.run_id, 0)
        if len(lines) > OUTPUT_LINES or used > OUTPUT_CHARS:
            return  # already cut
        if len(lines) == OUTPUT_LINES or used + len(event.text) > OUTPUT_CHARS:
            lines.append(f"… (more output not kept: the first {len(lines)} lines, at most {OUTPUT_CHARS} "
                         "characters, are)")
            self._printed_chars[event.run_id] = OUTPUT_CHARS + 1
            return
        lines.append(event.text)
        self._printed_chars[event.run_id] = used + len(event.text)


def latest_path(state_dir: Path, kernel: str) -> Path:
    return latest_report(state_dir, kernel)


def build_report(start: RunStarted, end: RunFinished, events: list[dict[str, Any]]) -> dict[str, Any]:
    rungs = [e for e in events if e["type"] == "rung_finished"]
    artifacts = [e for e in events if e["type"] == "artifact"]
    return {
        "kernel": start.kernel,
        "path": start.path,
        "version": start.version,
        "content_hash": start.content_hash,
        "reference": start.reference,
        "reference_hash": start.reference_hash,
        "tier": start.tier,
        "device": start.device,
        "arch": start.arch,
        "run_id": start.run_id,
        "run_dir": start.run_dir,
        "started": start.time,
        "finished": end.time,
        "verdict": end.verdict,
        "message": end.message,
        "summary": end.summary,
        "rungs": [{k: r[k] for k in ("rung", "status", "figures", "message", "error", "duration_s")} for r in rungs],
        "artifacts": [{k: a[k] for k in ("kind", "path", "function", "bytes")} for a in artifacts],
    }
