"""``ktui run``'s word on trust once its audits are done (``ktui.dispatch.trust`` decides).

Each verdict line already says ``trusted``, ``NOT TRUSTED: …`` or ``trust pending: …``. A pass
that was pending because its reference version had no audit yet is told again once the audit
``ktui run`` does after its verdicts has settled it: one line per such run (``--json``: an object of
type ``trust``). ``--strict`` is the final word: it waits for those audits and exits
``EXIT_UNTRUSTED`` when every kernel passed but a pass cannot be trusted (still pending included:
with ``--no-audit`` nothing audited it).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ktui.cli.exits import EXIT_OK, EXIT_UNTRUSTED
from ktui.dispatch.trust import AUDIT_FAILED, PENDING, AuditState, Trust, current
from ktui.protocol.events import PASSED, Event, RunFinished, RunStarted
from ktui.protocol.lines import trust_text
from ktui.workspace.kernels import Kernel, state_dir


@dataclass
class _Run:
    start: RunStarted
    verdict: str = ""
    summary: dict[str, Any] = field(default_factory=dict)


class TrustTally:
    """A consumer in front of the printer: keeps each run's start and verdict, for the word after the audits."""

    def __init__(self, printer: Callable[[Event], None]):
        self.printer = printer
        self.runs: dict[str, _Run] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.runs[event.run_id] = _Run(event)
        elif isinstance(event, RunFinished) and event.run_id in self.runs:
            self.runs[event.run_id].verdict, self.runs[event.run_id].summary = event.verdict, dict(event.summary)
        self.printer(event)


def settle(tally: TrustTally, kernels: list[Kernel], audits: list, strict: bool, as_json: bool, code: int) -> int:
    """Tell each pass that was pending when its verdict was printed what it is now, after ``audits``
    (``FirstAudit``s, those that failed included); the exit status: ``code``, or ``EXIT_UNTRUSTED``
    under ``strict`` when ``code`` is clean and a pass is not trusted."""
    roots = {k.path: k.root for k in kernels}
    failed = {a.reference_hash: AuditState(AUDIT_FAILED, message=a.message) for a in audits if a.verdict == AUDIT_FAILED}
    untrusted: list[tuple[_Run, Trust]] = []
    for run in tally.runs.values():
        if run.verdict != PASSED:
            continue
        root = roots.get(Path(run.start.path))
        state = state_dir(root) if root is not None else Path(run.start.run_dir).parents[2]
        trust = current(state, run.verdict, run.summary, run.start.reference_hash, failed.get(run.start.reference_hash))
        if run.summary.get("trusted") == PENDING and trust.trusted != PENDING:  # the audit settled it
            _tell(run, trust, as_json)
        if trust.trusted is not True:
            untrusted.append((run, trust))
    if strict and code == EXIT_OK and untrusted:
        for run, trust in untrusted:
            print(f"ktui: --strict: {run.start.kernel} v{run.start.version} passed, but its pass is not trusted: "
                  f"{'; '.join(trust.reasons)}{_how(run, trust)}", file=sys.stderr)
        return EXIT_UNTRUSTED
    return code


def _tell(run: _Run, trust: Trust, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps({"type": "trust", "kernel": run.start.kernel, "version": run.start.version,
                                     "run_id": run.start.run_id, **trust.to_summary()}) + "\n")
        sys.stdout.flush()
        return
    print(f"{run.start.kernel} v{run.start.version}: {trust_text(trust.to_summary())}{_how(run, trust)}", flush=True)


def _how(run: _Run, trust: Trust) -> str:
    """What to do about a pass still pending: audit its reference."""
    if trust.trusted != PENDING or not run.start.reference:
        return ""
    return f" (`ktui audit {os.path.relpath(run.start.reference)}` audits it)"
