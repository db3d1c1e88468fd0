"""``ktui run``'s audit: each reference version never audited gets the fast checks, never before a verdict.

A kernel that passes a weak test (ReLU on inputs that are never negative: a copy passes) has
proved nothing, and a user should not need to know ``ktui audit`` exists to hear it. So once every
verdict is printed, each reference version its kernels were judged against that ``.ktui/audits/``
has no record of (``unaudited``: the one cache of ``ktui.dispatch.auditor``, also ``ktui audit``'s
and the watch loop's) gets the fast checks only (zeros, a copy of an input, one constant, and the
reference's own checks: an input that does not matter), in the audit's own process (``Auditor``):
in the background of the workspace's owner, which outlives the caller (``ktui.dispatch.owner_audits``),
or, for ``--strict``, here, waited for (``audit_new_references``). The record is cached, so a
later run of the same reference version audits nothing and its summary says ``weak test`` or
``trusted`` from the cache. A weak test is a notice: it never changes the exit code but
``--strict``'s, and nothing here runs before a verdict.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ktui.dispatch.auditor import STRONG, WEAK, AuditOptions, Auditor, AuditTarget, cached, kernel_target
from ktui.dispatch.worker_protocol import WorkerStartError
from ktui.protocol.events import ERROR, RunFinished
from ktui.protocol.job import Options
from ktui.workspace.kernels import Kernel, ProblemError, state_dir

PENDING = "pending"  # an audit not done yet: handed to the owner's background, or to no one (``ktui audit`` does it)


@dataclass
class FirstAudit:
    """One reference version's fast audit, as ``ktui run`` tells it."""

    reference: Path
    reference_hash: str
    kernels: list[str] = field(default_factory=list)
    verdict: str = ERROR  # strong | weak | error | pending
    reasons: list[str] = field(default_factory=list)
    message: str = ""  # why it could not be audited
    duration_s: float = 0.0
    auditing: str = ""  # pending: who audits it in the background ("the workspace's daemon (pid 123)"), "" for no one

    @property
    def weak(self) -> list[str]:
        """Each reason in a few words: ``a copy of input 0 passes``."""
        return [short_reason(r) for r in self.reasons]

    def to_json(self) -> dict:
        """``--json``'s line: an object of its own type, beside the events."""
        line = {"type": "audit", "reference": str(self.reference), "reference_hash": self.reference_hash,
                "kernels": self.kernels, "verdict": self.verdict, "reasons": self.reasons, "weak": self.weak,
                "message": self.message, "checks": "fast", "duration_s": self.duration_s}
        return {**line, "auditing": self.auditing or None} if self.verdict == PENDING else line


def short_reason(reason: str) -> str:
    """``a kernel that returns a copy of input 0 passes on every test shape — …`` → ``a copy of input 0 passes``."""
    return reason_head(reason).removeprefix("a kernel that returns ")


def reason_head(reason: str) -> str:
    """A weakness without its explanation: ``a kernel that returns zeros passes``."""
    return reason.split(" — ", 1)[0].removesuffix(" on every test shape").rstrip(",")


def unaudited(kernels: Iterable[Kernel]) -> list[tuple[AuditTarget, str, list[str]]]:
    """The reference versions of ``kernels`` that no cached audit covers, each once, with its kernels."""
    found: dict[tuple[Path, str], tuple[AuditTarget, str, list[str]]] = {}
    for kernel in kernels:
        if kernel.reference is None:
            continue
        try:
            target = kernel_target(kernel)
            digest = target.hash()
        except (ProblemError, OSError):
            continue  # the run already said what is wrong with the reference
        key = (target.root, digest)
        if key not in found:
            if cached(state_dir(target.root), digest, any_shapes=True, fast_ok=True) is not None:
                continue
            found[key] = (target, digest, [])
        found[key][2].append(kernel.id)
    return list(found.values())


def audit_new_references(kernels: Iterable[Kernel], options: Options) -> Iterable[FirstAudit]:
    """The fast audit of each reference version of ``kernels`` never audited, one after another."""
    todo = unaudited(kernels)
    if not todo:
        return
    auditor = Auditor(AuditOptions(arch=options.arch, force_cpu=options.force_cpu, seed=options.seed, fast=True))
    try:
        for target, digest, ids in todo:
            yield audit_one(auditor, target, digest, ids)
    finally:
        auditor.close()


def not_audited(todo: list[tuple[AuditTarget, str, list[str]]], auditing: list[str] = (),
                failed: dict[str, str] | None = None, by: str = "") -> list[FirstAudit]:
    """Each of ``todo`` (``unaudited``) as it stands once handed over: ``pending`` (``by`` audits those
    in ``auditing`` in its background; no one the others) or, for those in ``failed``, ``error``."""
    failed = failed or {}
    told = []
    for target, digest, ids in todo:
        reference = str(target.reference)
        if reference in failed:
            told.append(FirstAudit(target.reference, digest, ids, ERROR, message=failed[reference]))
        else:
            told.append(FirstAudit(target.reference, digest, ids, PENDING, auditing=by if reference in auditing else ""))
    return told


def audit_one(auditor: Auditor, target: AuditTarget, digest: str, ids: list[str],
              cancel: threading.Event | None = None) -> FirstAudit:
    """The fast audit of one reference version (cached when strong or weak); ``cancel``: set from
    another thread, it kills the audit's process and the audit ends ``error``, nothing cached."""
    result = FirstAudit(target.reference, digest, ids)
    started = time.monotonic()
    finish = None
    done = threading.Event()
    if cancel is not None:
        threading.Thread(target=cancel_when, args=(cancel, done, auditor), name="ktui-audit-cancel",
                         daemon=True).start()
    try:
        for event in auditor.audit(target):  # caches a strong or weak verdict
            if isinstance(event, RunFinished):
                finish = event
    except (WorkerStartError, ProblemError, OSError) as exc:
        result.message = str(exc)
    finally:
        done.set()
    result.duration_s = round(time.monotonic() - started, 2)
    if finish is not None and finish.verdict in (STRONG, WEAK):
        result.verdict, result.reasons = finish.verdict, list(finish.summary.get("reasons") or [])
    elif finish is not None:
        result.message = finish.message or "the audit gave no verdict"
    result.message = result.message.splitlines()[0] if result.message else result.message
    return result


def cancel_when(cancel: threading.Event, finished: threading.Event, auditor: Auditor) -> None:
    """Kill ``auditor``'s process as soon as ``cancel`` is set (a run pre-empts background work, the
    queue stops), unless the audit ``finished`` first."""
    while not finished.is_set():
        if cancel.wait(0.1):
            auditor.cancel()
            return
