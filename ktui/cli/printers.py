"""How ``ktui run`` prints a run: JSON lines for agents, or plain lines for people (one consumer
of the session's events each; ``ktui run --ray`` uses the same two)."""

from __future__ import annotations

import os
import sys


def print_first_audits(audits, as_json: bool = False) -> list:
    """``ktui run``'s audit (``ktui.dispatch.first_audit``), told as each one ends: with ``--json`` one
    object per reference (``"type": "audit"``); else one line per weak reference, last, ending
    ``weak test: …``, one per reference that could not be audited, and one ``audit: strong`` line.
    One not done yet (``pending``: in the owner's background, or by no one) is said on stderr, with
    ``--json`` too. Returns the audits, told."""
    import json  # deferred for start-up speed

    strong, weak, told = [], [], []
    for audit in audits:
        told.append(audit)
        if audit.verdict == "pending":
            print(f"ktui: {_pending(audit)}", file=sys.stderr, flush=True)
        if as_json:
            sys.stdout.write(json.dumps(audit.to_json(), default=str) + "\n")
            sys.stdout.flush()
        elif audit.verdict == "pending":
            continue
        elif audit.verdict == "strong":
            strong.append(audit)
        elif audit.verdict == "weak":
            weak.append(audit)
        else:
            print(f"audit {os.path.relpath(audit.reference)}: could not audit · {audit.message}", flush=True)
    if strong:
        names = ", ".join(os.path.relpath(a.reference) for a in strong)
        print(f"audit: strong · {names} (fast checks, {sum(a.duration_s for a in strong):.1f} s)", flush=True)
    for audit in weak:
        ref = os.path.relpath(audit.reference)
        print(f"audit {ref} (`ktui audit {ref}` says why): weak test: {'; '.join(audit.weak)}", flush=True)
    return told


def _pending(audit) -> str:
    """``references/add.py: not audited yet: `ktui audit references/add.py` audits it (--strict waits for it)``,
    or who audits it in the background."""
    ref = os.path.relpath(audit.reference)
    if audit.auditing:
        return (f"{ref}: not audited yet: {audit.auditing} audits it in the background; the next run of its "
                "kernels says what it finds (--strict waits for it)")
    return f"{ref}: not audited yet: `ktui audit {ref}` audits it (--strict waits for it)"


class JsonPrinter:
    """``--json``: every event as one JSON line, flushed, so an agent can follow it live."""

    def __call__(self, event) -> None:
        sys.stdout.write(event.dumps() + "\n")
        sys.stdout.flush()


class LinePrinter:
    """Plain lines: a header per kernel, one line per rung, one summary line per kernel, and what a
    rung says it is doing while it runs (the GPU's one-time calibration, step by step).

    On the CPU tier the header waits for the pre-checks: only they tell a Triton kernel (run in
    the interpreter) from a CuTeDSL one (compiled only), and the header says which. Rungs skipped
    in a row for one reason are held and printed as one line (``[benchmark ×3] skipped — no GPU``).
    Under the summary, a run that printed says how much and where it is kept (``-v`` prints it)."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self._started = {}
        self._unheaded = {}  # run id → its run_started, header not printed yet
        self._skipped: dict[str, list[dict]] = {}  # run id → the skipped rungs held, one reason
        self._printed: dict[str, int] = {}  # run id → lines it printed

    def __call__(self, event) -> None:
        # deferred for start-up speed
        from ktui.protocol.events import Output, RunFinished, RungFinished, RungStarted, RunStarted
        from ktui.protocol.lines import rung_line, same_skip, summary_line

        if isinstance(event, RunStarted):
            self._started[event.run_id] = event
            if event.tier == "cpu":
                self._unheaded[event.run_id] = event
            else:
                self._header(event)
            return
        if isinstance(event, Output):
            self._printed[event.run_id] = self._printed.get(event.run_id, 0) + 1
        first = isinstance(event, RungFinished) and event.rung == "pre-checks"
        noted = isinstance(event, RungStarted) and bool(event.note)
        shown = isinstance(event, (RungFinished, RunFinished)) or noted or (isinstance(event, Output) and self.verbose)
        if event.run_id in self._unheaded and shown:
            self._header(self._unheaded.pop(event.run_id), event.figures if first else None)
        held = self._skipped.get(event.run_id, [])
        record = event.to_json() if isinstance(event, RungFinished) else None
        if record is not None and record["status"] == "skipped" and (not held or same_skip(held[0], record)):
            self._skipped.setdefault(event.run_id, []).append(record)
            return
        if shown:
            self._flush_skipped(event.run_id)
        if record is not None and record["status"] == "skipped":
            self._skipped[event.run_id] = [record]
        elif record is not None:
            print(rung_line(record), flush=True)
        elif noted:
            print(f"[{event.rung}] … {event.note}", flush=True)
        elif isinstance(event, Output) and self.verbose:
            print(f"   | {event.text}", flush=True)
        elif isinstance(event, RunFinished):
            start = self._started.pop(event.run_id, None)
            printed = self._printed.pop(event.run_id, 0)
            if start is None:
                return
            print(summary_line(start.kernel, start.version, event.verdict, event.summary, start.tier, start.arch,
                               event.duration_s, event.message), flush=True)
            if printed:
                print(self._printed_note(start, printed), flush=True)

    def _flush_skipped(self, run_id: str) -> None:
        from ktui.protocol.lines import folded_line  # deferred for start-up speed

        held = self._skipped.pop(run_id, None)
        if held:
            print(folded_line(held), flush=True)

    def _printed_note(self, start, lines: int) -> str:
        """``  printed 12 line(s), kept in .ktui/runs/k/3/output.txt (-v prints them as they come)``."""
        from ktui.protocol.statedir import OUTPUT_FILE  # deferred for start-up speed

        kept = os.path.relpath(os.path.join(start.run_dir, OUTPUT_FILE))
        return f"  printed {lines} line(s), kept in {kept}" + ("" if self.verbose else " (-v prints them as they come)")

    @staticmethod
    def _header(event, precheck_figures: dict | None = None) -> None:
        from ktui.protocol.lines import confinement_note, where_text  # deferred for start-up speed

        where = where_text(event.tier, event.device, event.arch, precheck_figures)
        ref = os.path.relpath(event.reference) if event.reference else "no reference"
        print(f"== {event.kernel} v{event.version} ({os.path.relpath(event.path)} → {ref}) · {where}"
              f"{confinement_note(event.confined, event.confinement)}", flush=True)
