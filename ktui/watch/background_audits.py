"""The watch loop audits each reference version once, in the background: ``weak test`` where it shows.

A kernel that passes against a weak test (ReLU on inputs that are never negative: a copy passes)
has proved nothing. ``ktui audit`` says so on request; the watch loop asks on its own, once per
reference version: at its start and on every save it looks up the audit of each affected kernel's
reference (``.ktui/audits/<reference hash>.json``). A cached verdict is told at once; a reference
version never audited is queued as scheduler background work and audited in its own process
(``ktui.dispatch.auditor.Auditor``), the verdict cached like ``ktui audit``'s. Each verdict is a
``audit_finished`` notice: the dashboard marks the kernels ``weak test``, headless prints it.

Pre-empted, not queued behind: the audit runs only when no run waits, and a save (any submit)
kills its process at once and it starts again from the beginning after the runs. It can take
minutes and only adds a warning, while the save's verdict is what the user is waiting for; a
queued-behind audit would make that save wait for all of it, and running beside the run would
share the CPU, or on the GPU the device, with a timed benchmark. The scheduler runs one thing at
a time and starts the run only once the killed audit process is reaped. The price: an audit
interrupted by every save is done again in full (nothing partial is cached). With ``--remote``
the audit runs on this machine (it judges the reference's test, not a kernel), still never
beside a run.

A reference that cannot be audited (it raises, it hangs) is told once and not retried until the
watch starts again; a verdict of ``strong`` or ``weak`` is cached, so a later start never
audits that version again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from ktui.dispatch.auditor import STRONG, WEAK, AuditOptions, Auditor, AuditTarget, cached, kernel_target
from ktui.dispatch.first_audit import cancel_when
from ktui.dispatch.queue import Listener, RunQueue
from ktui.dispatch.worker_protocol import WorkerStartError
from ktui.protocol.events import RunFinished
from ktui.protocol.job import Options
from ktui.protocol.notices import AuditFinished
from ktui.workspace.kernels import Kernel, ProblemError, state_dir


class BackgroundAudits:
    """Which reference versions are audited, told, or could not be audited; the audit job itself."""

    def __init__(self, scheduler: RunQueue, listener: Listener, resolve: Callable[[Path], Kernel | None],
                 options: Options):
        self.scheduler = scheduler
        self.listener = listener
        self.resolve = resolve
        self.options = AuditOptions(arch=options.arch, force_cpu=options.force_cpu, seed=options.seed)
        self._lock = threading.Lock()
        self._told: dict[Path, str] = {}  # reference → the version whose verdict was told last
        self._failed: set[str] = set()  # versions that could not be audited (until the watch restarts)
        self._kernels: dict[Path, set[str]] = {}  # reference → the kernels judged against it
        self._kernel_of: dict[Path, Path] = {}  # reference → a kernel that names it (to resolve it again)

    def request(self, kernel: Kernel) -> None:
        """From any thread: tell the cached verdict of ``kernel``'s reference, or queue its audit."""
        found = self._target(kernel)
        if found is None:
            return
        target, digest = found
        with self._lock:
            self._kernels.setdefault(target.reference, set()).add(kernel.id)
            self._kernel_of[target.reference] = kernel.path
            if self._told.get(target.reference) == digest or digest in self._failed:
                return
        if self._tell_cached(target, digest):
            return
        self.scheduler.submit_background(target.reference, f"auditing {target.name}",
                                         lambda cancel: self._audit(target.reference, cancel))

    def _target(self, kernel: Kernel) -> tuple[AuditTarget, str] | None:
        if kernel.reference is None:
            return None
        try:
            target = kernel_target(kernel)
            return target, target.hash()
        except (ProblemError, OSError):
            return None  # the run says what is wrong with the reference

    def _tell_cached(self, target: AuditTarget, digest: str) -> bool:
        record = cached(state_dir(target.root), digest, any_shapes=True)
        if record is None or record.get("verdict") not in (STRONG, WEAK):
            return False
        self._tell(target, digest, record["verdict"], tuple(record.get("reasons") or ()), cached=True)
        return True

    def _tell(self, target: AuditTarget, digest: str, verdict: str, reasons: tuple[str, ...] = (),
              message: str = "", cached: bool = False) -> None:
        with self._lock:
            self._told[target.reference] = digest
            kernels = tuple(sorted(self._kernels.get(target.reference, ())))
        self.listener(AuditFinished(str(target.reference), digest, kernels, verdict, reasons, message, cached))

    # -- the job, in the scheduler's thread ----------------------------------------------------
    def _audit(self, reference: Path, cancel: threading.Event) -> bool:
        """Audit the reference as it is now; False when pre-empted (the scheduler queues it again)."""
        with self._lock:
            kernel_path = self._kernel_of.get(reference)
        kernel = self.resolve(kernel_path) if kernel_path is not None else None
        found = self._target(kernel) if kernel is not None else None
        if found is None:
            return True  # the kernel or its reference is gone
        target, digest = found
        with self._lock:
            done = self._told.get(target.reference) == digest or digest in self._failed
        if done or self._tell_cached(target, digest):
            return True
        auditor = Auditor(self.options)
        finished = threading.Event()
        threading.Thread(target=cancel_when, args=(cancel, finished, auditor), name="ktui-audit-cancel",
                         daemon=True).start()
        finish: RunFinished | None = None
        error = ""
        try:
            for event in auditor.audit(target):
                if isinstance(event, RunFinished):
                    finish = event
        except (WorkerStartError, ProblemError, OSError) as exc:
            error = str(exc)
        finally:
            finished.set()
            auditor.close()
        if finish is not None and finish.verdict in (STRONG, WEAK):  # cached by the auditor
            self._tell(target, digest, finish.verdict, tuple(finish.summary.get("reasons") or ()))
            return True
        if cancel.is_set():
            return False  # killed for a run: nothing was cached, it runs again later
        with self._lock:
            self._failed.add(digest)
        message = error or (finish.message if finish is not None else "") or "the audit gave no verdict"
        self._tell(target, digest, "error", message=message.splitlines()[0])
        return True

