"""The ``run`` tool's audit, as ``ktui run``'s (``ktui.dispatch.first_audit``): after the verdicts, each
reference version never audited gets the fast checks, cached in ``.ktui/audits/``.

A kernel that passes a weak test has proved nothing, and an agent should not need to know the
``audit`` tool exists to hear it: a weak reference's reasons go into each of its kernels' summary
as ``weak_test`` (its first reason) and ``weak_test_reasons``, the keys a run already carries when
the cache said weak before it, and a pass that was ``trusted: "pending"`` on this audit is settled
by it (``ktui.dispatch.trust``). The audit takes its turn on the workspace owner's GPU (never beside
a run), in its own process; a reference audited once is never audited again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktui.dispatch.auditor import WEAK
from ktui.dispatch.first_audit import FirstAudit, audit_new_references, unaudited
from ktui.dispatch.owner import OwnerGone, gpu_turn
from ktui.dispatch.trust import AuditState, judge, with_trust
from ktui.protocol.job import Options
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
    return [answered(audit.to_json()) for audit in audits]


def answered(audit: dict[str, Any]) -> dict[str, Any]:
    """An audit as the ``run`` tool answers it: the reference, its verdict, why weak (in a few words
    and in full) or why it could not be judged; not what the run already says (its kernels)."""
    out = {"reference": audit["reference"], "verdict": audit["verdict"], "weak": audit.get("weak") or []}
    if audit.get("reasons"):
        out["reasons"] = audit["reasons"]
    if audit.get("message"):
        out["message"] = audit["message"]
    return out
