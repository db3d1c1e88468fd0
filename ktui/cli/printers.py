"""How ``ktui run`` prints a run: JSON lines for agents, or plain lines for people (one consumer
of the session's events each; ``ktui run --ray`` uses the same two)."""

from __future__ import annotations

import os
import sys


class JsonPrinter:
    """``--json``: every event as one JSON line, flushed, so an agent can follow it live."""

    def __call__(self, event) -> None:
        sys.stdout.write(event.dumps() + "\n")
        sys.stdout.flush()


class LinePrinter:
    """Plain lines: a header per kernel, one line per rung, one summary line per kernel."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self._started = {}

    def __call__(self, event) -> None:
        # deferred for start-up speed
        from ktui.protocol.events import Output, RunFinished, RungFinished, RunStarted
        from ktui.run.render import confinement_note, rung_line, summary_line

        if isinstance(event, RunStarted):
            self._started[event.run_id] = event
            where = f"{event.tier} · {event.device} · {event.arch}" if event.tier != "-" else "not run"
            ref = os.path.relpath(event.reference) if event.reference else "no reference"
            print(f"== {event.kernel} v{event.version} ({os.path.relpath(event.path)} → {ref}) · {where}"
                  f"{confinement_note(event.confined, event.confinement)}", flush=True)
        elif isinstance(event, RungFinished):
            print(rung_line(event.to_json()), flush=True)
        elif isinstance(event, Output) and self.verbose:
            print(f"   | {event.text}", flush=True)
        elif isinstance(event, RunFinished):
            start = self._started.pop(event.run_id, None)
            if start is None:
                return
            print(summary_line(start.kernel, start.version, event.verdict, event.summary, start.tier, start.arch,
                               event.duration_s, event.message), flush=True)
