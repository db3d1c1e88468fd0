"""Whether a run's pass can be trusted: the one rule every surface reads.

A pass proves something only when the test could have failed. Two things say whether it could:
the run's own figures (every correctness shape checked, with signal above the noise floor) and
the audit of the reference version it was judged by (``.ktui/audits/<reference hash>.json``: does
a kernel of zeros, a copy of an input, a constant pass its test?). So ``trusted`` is

- ``True``: a pass, every check with signal, its reference version audited ``strong``;
- ``False``, with the reasons: correctness not checked, no signal on every shape, a weak test, or
  an audit that could not be done; a run that did not pass is never trusted (its verdict says why);
- ``"pending"``: a pass whose reference version has no audit yet (its first audit is still going
  on in the owner's background, or nothing audits it: a one-shot run, ``--no-audit``), and nothing
  else against it.

The rule reads only the run's summary (what the history stores) and the audit's record, so who
audits the reference, and when (after ``ktui run``'s verdicts, in the MCP ``run``, in a watch's or
an owner's background), changes where the record comes from, never the answer: a surface that
shows a stored run asks ``current`` again and a ``pending`` becomes ``True`` or ``False`` once the
record exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.dispatch.auditor import STRONG, WEAK, cached
from ktui.dispatch.first_audit import PENDING, reason_head
from ktui.protocol.events import PASSED
from ktui.protocol.lines import NO_SIGNAL_EVERYWHERE

TRUSTED, REASONS = "trusted", "trust_reasons"  # the summary's keys
NOT_AUDITED, AUDIT_FAILED = "none", "error"


@dataclass(frozen=True)
class AuditState:
    """What is known of one reference version's audit: ``strong``, ``weak`` (with why), ``none``
    (no record) or ``error`` (an audit in hand that could not judge it: never cached)."""

    verdict: str
    reasons: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True)
class Trust:
    trusted: bool | str  # True, False or PENDING
    reasons: tuple[str, ...] = ()  # why not (empty when trusted)

    def to_summary(self) -> dict[str, Any]:
        return {TRUSTED: self.trusted, REASONS: list(self.reasons)} if self.reasons else {TRUSTED: self.trusted}


def audit_state(state: Path, reference_hash: str) -> AuditState:
    """The audit record of ``reference_hash`` in the ``.ktui/`` folder ``state`` (one small file)."""
    record = cached(state, reference_hash, any_shapes=True, fast_ok=True) if reference_hash else None
    if record is None or record.get("verdict") not in (STRONG, WEAK):
        return AuditState(NOT_AUDITED)
    return AuditState(record["verdict"], tuple(record.get("reasons") or ()))


def judge(verdict: str, summary: dict[str, Any], audit: AuditState) -> Trust:
    """The rule: the run's ``verdict`` and ``summary`` (as stored) and its reference's ``audit``."""
    if verdict != PASSED:
        return Trust(False)  # nothing passed: the verdict and its first failure say why
    against: list[str] = []
    if summary.get("unchecked"):
        against.append(f"correctness not checked: {summary['unchecked']}")
    silent = summary.get("no_signal") or []
    correct = summary.get("correct") or []
    if silent and len(correct) == 2 and len(silent) >= correct[1]:
        against.append(f"{NO_SIGNAL_EVERYWHERE}: every value is below the noise floor, so a kernel of zeros would pass")
    weak = list(audit.reasons) if audit.verdict == WEAK else []
    if not weak and summary.get("weak_test") is not None:  # stored by the run from the cache it read then
        weak = list(summary.get("weak_test_reasons") or [summary["weak_test"]])
    if weak or audit.verdict == WEAK:
        against.append("weak test: " + ("; ".join(reason_head(r) for r in weak) if weak else "its audit says weak"))
    if audit.verdict == AUDIT_FAILED:
        against.append(f"the reference could not be audited: {audit.message or 'no verdict'}")
    if against:
        return Trust(False, tuple(against))
    if audit.verdict == STRONG:
        return Trust(True)
    return Trust(PENDING, ("reference not audited yet: a trivial kernel might pass its test",))


def current(state: Path, verdict: str, summary: dict[str, Any], reference_hash: str,
            audit: AuditState | None = None) -> Trust:
    """The trust of a stored run now: the rule on its summary and the audit record as it is now
    (``audit``: one in hand that no record holds, an audit that failed; a record wins over it)."""
    recorded = audit_state(state, reference_hash)
    return judge(verdict, summary, audit if recorded.verdict == NOT_AUDITED and audit is not None else recorded)


def with_trust(summary: dict[str, Any], trust: Trust) -> dict[str, Any]:
    """``summary`` with its trust set to ``trust`` (the keys replaced, never left stale)."""
    rest = {k: v for k, v in summary.items() if k not in (TRUSTED, REASONS)}
    return {**rest, **trust.to_summary()}
