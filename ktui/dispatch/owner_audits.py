"""The first audits callers hand to the workspace's owner: done in its background, after they have gone.

``ktui run`` and the MCP ``run`` answer as soon as their verdicts are out, yet the reference
versions those verdicts were judged against that no record covers (``first_audit.unaudited``)
still need their fast audit, which can take minutes. A caller served by an owner that outlives it
(the workspace's daemon, ``ktui serve``, a ``ktui watch`` of its own, an MCP server's own queue)
hands them over (``audit_request``) and exits. The owner audits each reference version once, as
background work of its queue (``RunQueue.submit_background``: only while no run waits, killed by
any submit and started again after it, so it never delays a verdict nor shares the GPU with one),
in the audit's own process; the record goes to ``.ktui/audits/``, where the next run's summary, the
MCP tools and the dashboard read it, and every listener hears it (``audit_finished``: the views'
dashboards). A reference version that could not be audited is not tried again while the owner
runs: a caller that hands it over again is told why (``ktui audit`` tries again).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ktui.dispatch.auditor import STRONG, WEAK, AuditOptions, Auditor, AuditTarget, cached
from ktui.dispatch.first_audit import audit_one, unaudited
from ktui.dispatch.queue import Listener, RunQueue
from ktui.protocol.job import Options
from ktui.protocol.notices import AuditFinished
from ktui.protocol.owner import OwnerAuditing
from ktui.workspace.kernels import Kernel, state_dir


@dataclass
class _Handed:
    target: AuditTarget
    options: Options
    kernels: set[str] = field(default_factory=set)


class OwnerAudits:
    """The reference versions callers handed over, audited one at a time in ``queue``'s background;
    ``by``: the owner in words, as a caller tells it ("the workspace's daemon (pid 123)")."""

    def __init__(self, queue: RunQueue, listener: Listener, by: str):
        self.queue = queue
        self.listener = listener
        self.by = by
        self._lock = threading.Lock()
        self._waiting: dict[str, _Handed] = {}  # reference hash → its audit, queued or in flight
        self._failed: dict[str, str] = {}  # reference hash → why it could not be audited

    def take(self, kernels: list[Kernel], options: Options) -> OwnerAuditing:
        """From any thread: queue the audit of each reference version of ``kernels`` no record covers."""
        answer = OwnerAuditing(by=self.by)
        for target, digest, ids in unaudited(kernels):
            reference = str(target.reference)
            with self._lock:
                if digest in self._failed:
                    answer.failed[reference] = self._failed[digest]
                    continue
                self._waiting.setdefault(digest, _Handed(target, options)).kernels.update(ids)
            # keyed by version: a reference saved again is another audit (a second submit of one is dropped)
            self.queue.submit_background(Path(f"{reference}@{digest}"), f"auditing {target.name}",
                                         partial(self._audit, digest))
            answer.auditing.append(reference)
        return answer

    def _audit(self, digest: str, cancel: threading.Event) -> bool:
        """In the queue's thread: False when a run pre-empted it (the queue starts it again later)."""
        with self._lock:
            handed = self._waiting.get(digest)
        if handed is None:
            return True  # done by an earlier turn
        target, options = handed.target, handed.options
        record = cached(state_dir(target.root), digest, any_shapes=True, fast_ok=True)
        if record is not None:  # audited meanwhile (`ktui audit`, the watch, a --strict run): told as it is
            verdict, reasons, message = record.get("verdict", ""), tuple(record.get("reasons") or ()), ""
        else:
            auditor = Auditor(AuditOptions(arch=options.arch, force_cpu=options.force_cpu, seed=options.seed,
                                           fast=True))
            try:
                result = audit_one(auditor, target, digest, sorted(handed.kernels), cancel)
            finally:
                auditor.close()
            if result.verdict not in (STRONG, WEAK) and cancel.is_set():
                return False  # killed for a run: nothing was cached
            verdict, reasons, message = result.verdict, tuple(result.reasons), result.message
        with self._lock:
            self._waiting.pop(digest, None)
            if verdict not in (STRONG, WEAK):
                self._failed[digest] = message = message or "the audit gave no verdict"
            kernels = tuple(sorted(handed.kernels))
        self.listener(AuditFinished(str(target.reference), digest, kernels, verdict, reasons, message,
                                    cached=record is not None))
        return True
