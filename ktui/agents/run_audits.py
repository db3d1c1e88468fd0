"""The ``run`` tool's audit, as ``ktui run``'s (``ktui.dispatch.first_audit``): after the verdicts, each
reference version never audited gets the fast checks, cached in ``.ktui/audits/``.

A kernel that passes a weak test has proved nothing, and an agent should not need to know the
``audit`` tool exists to hear it. The call answers at its verdicts (``audit_later``): the audits go
on in the background of the workspace's owner (its daemon) or of this server's own queue, both of
which outlive the call (``ktui.dispatch.owner_audits``), each pass they concern ``trusted:
"pending"`` until then; a later ``run``, ``latest`` or ``kernels`` reads what they found from the
cache. ``strict`` waits for them (``audit_after_run``): a weak reference's reasons then go into each
of its kernels' summary as ``weak_test`` (its first reason) and ``weak_test_reasons``, the keys a
run already carries when the cache said weak before it, and a pending pass is settled by it
(``ktui.dispatch.trust``); that audit takes its turn on the workspace owner's GPU (never beside a
run), in its own process. A reference audited once is never audited again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ktui.dispatch.auditor import WEAK
from ktui.dispatch.first_audit import PENDING, FirstAudit, audit_new_references, not_audited, unaudited
from ktui.dispatch.owner import OwnerGone, gpu_turn
from ktui.dispatch.trust import AuditState, judge, with_trust
from ktui.protocol.job import Options
from ktui.protocol.owner import OwnerAuditing
from ktui.workspace.kernels import Kernel, state_dir


def audit_after_run(root: Path, kernels: list[Kernel], options: Options, results: list[dict[str, Any]]) -> list[dict]:
    """Audit the references of ``kernels`` never audited; mark ``results`` (the run's digests) of a
    weak one; answer each audit as ``ktui run --json`` prints it (none when all were audited)."""
    todo = unaudited(kernels)
    if not todo:
        return []
    audits: list[FirstAudit] = []
    try:
        with gpu_turn(state_dir(root), f"MCP audit of {', '.join(t.reference.name for t, _, _ in todo)}"):
            audits.extend(audit_new_references(kernels, options))
    except OwnerGone as exc:
        return [answered({"reference": str(t.reference), "verdict": "error", "message": str(exc)}) for t, _, _ in todo]
    _settle(audits, results)
    return [answered(audit.to_json()) for audit in audits]


def audit_later(hand: Callable[[], OwnerAuditing | None], kernels: list[Kernel], results: list[dict[str, Any]]
                ) -> list[dict]:
    """Hand the references of ``kernels`` never audited to whoever outlives this call (``hand``: the
    owner's or this server's background; None: no one) and answer each as it stands: ``pending``,
    or ``error`` when the owner could not audit it before (its passes then settled not trusted)."""
    todo = unaudited(kernels)
    if not todo:
        return []
    handed = hand()
    audits = not_audited(todo, handed.auditing, handed.failed, handed.by) if handed else not_audited(todo)
    _settle([a for a in audits if a.verdict != PENDING], results)
    return [answered({**audit.to_json(), "message": _pending(audit)} if audit.verdict == PENDING else audit.to_json())
            for audit in audits]


def _pending(audit: FirstAudit) -> str:
    if audit.auditing:
        return (f"not audited yet: {audit.auditing} audits it in the background; a later `run`, `latest` or "
                "`kernels` says what it finds (strict=true waits for it)")
    return f"not audited yet: the `audit` tool on `{audit.reference}` audits it (strict=true waits for it)"


def _settle(audits: list[FirstAudit], results: list[dict[str, Any]]) -> None:
    """Mark ``results`` (the run's digests) of a weak reference, and settle each pass pending on ``audits``."""
    of_kernel = {kernel: audit for audit in audits for kernel in audit.kernels}
    for result in results:
        audit = of_kernel.get(result.get("kernel"))
        if audit is None:
            continue
        summary = result.get("summary") or {}
        if audit.verdict == WEAK and audit.reasons:
            summary = {**summary, "weak_test": audit.reasons[0], "weak_test_reasons": audit.reasons}
        # a pass pending on this audit is settled by it: the one rule, on the audit in hand
        state = AuditState(audit.verdict, tuple(audit.reasons), audit.message)
        result["summary"] = with_trust(summary, judge(str(result.get("verdict")), summary, state))


def answered(audit: dict[str, Any]) -> dict[str, Any]:
    """An audit as the ``run`` tool answers it: the reference, its verdict, why weak (in a few words
    and in full) or why it could not be judged; not what the run already says (its kernels)."""
    out = {"reference": audit["reference"], "verdict": audit["verdict"], "weak": audit.get("weak") or []}
    if audit.get("reasons"):
        out["reasons"] = audit["reasons"]
    if audit.get("message"):
        out["message"] = audit["message"]
    return out
