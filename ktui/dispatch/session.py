"""One workspace's runs: turn a kernel file into a job, run it, hand every event to consumers.

Shared by ``ktui run`` and ``ktui watch``: it snapshots the file (the version is the hash of the
exact bytes the worker will import), assigns the version number from the history, and feeds the
stream to the store, the report writer and whoever else listens (a printer, the dashboard).
"""

from __future__ import annotations

import errno
import uuid
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ktui.dispatch.auditor import weak_test
from ktui.dispatch.compare import VersionComparer
from ktui.dispatch.never_ran import never_ran
from ktui.dispatch.runner import Runner, WorkerRunner
from ktui.dispatch.trust import current, with_trust
from ktui.history.reports import ReportWriter
from ktui.history.store import Store
from ktui.protocol.events import (
    CANCELLED,
    ERROR,
    FAILED,
    SUSPICIOUS,
    ErrorInfo,
    Event,
    RunFinished,
    first_failure,
)
from ktui.protocol.job import Job, Options
from ktui.protocol.sourcelines import python_text, syntax_error, syntax_error_info
from ktui.protocol.statedir import StateError, run_dir
from ktui.workspace.kernels import (
    Kernel,
    content_hash,
    reference_on_disk,
    reference_snapshot,
    reference_stat,
    state_dir,
)

Consumer = Callable[[Event], None]


class Session:
    def __init__(self, root: Path, runner: Runner | None = None, consumers: Iterable[Consumer] = ()):
        self.root = Path(root).resolve()
        self.state = state_dir(self.root)
        self.store = Store.of(self.state)
        try:
            self.store.must_write()
        except StateError:
            self.store.close()
            raise
        self.runner: Runner = runner or WorkerRunner()
        self.consumers: list[Consumer] = [self.store.record, _unless_disk_full(ReportWriter(self.state), self.store),
                                          *consumers]
        # Labels benchmark figures against earlier versions before anyone sees them.
        self.compare = VersionComparer(self.store, self.state)
        self._written: dict[str, tuple] = {}  # run id → its reference files' stat when snapshotted
        self._reruns: set[str] = set()  # runs started again because their reference changed
        self._undecodable: dict[str, ErrorInfo] = {}  # run id → why Python could not read its files

    def run_dir(self, kernel_id: str, version: int) -> Path:
        return run_dir(self.state, kernel_id, version)

    def prepare(self, kernel: Kernel, options: Options) -> Job:
        """Snapshot the kernel file and give it a version and a run folder."""
        data = kernel.path.read_bytes()
        digest = content_hash(data)
        version = self.store.version_for(kernel.id, digest, str(kernel.path))
        run_dir = self.run_dir(kernel.id, version)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "source.py").write_bytes(data)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            self.store.stop_recording(exc)
        reference = reference_snapshot(kernel)  # before any user code of this run: what judges it
        written = reference_stat(list(reference.files))
        run_id = uuid.uuid4().hex
        self._written[run_id] = written
        # As Python would read them; a file Python could not import fails the pre-checks here.
        source, undecodable = python_text(data, str(kernel.path))
        references = {}
        for path, text in reference.files.items():
            references[str(path)], error = python_text(text, str(path))
            undecodable = undecodable or error
        if undecodable is not None:
            self._undecodable[run_id] = syntax_error_info(undecodable)
        return Job(
            run_id=run_id,
            kernel_id=kernel.id,
            kernel_path=str(kernel.path),
            reference_path=str(kernel.reference) if kernel.reference else "",
            reference_error=kernel.reference_error,
            reference_hash=reference.hash,
            root=str(kernel.root),
            version=version,
            content_hash=digest,
            source=source,
            run_dir=str(run_dir),
            options=options,
            format=kernel.format,
            problem=dict(kernel.problem),
            reference_files=references,
            reference_modules={name: str(path) for name, path in reference.modules.items()},
            sizes=self.store.sizes(reference.hash),
        )

    def events(self, job: Job, runner: Runner | None = None) -> Iterator[Event]:
        """The run's events, labelled against the history and already handed to every consumer;
        ``runner``: where it runs when not the session's own (one GPU of several)."""
        runner = runner or self.runner
        undecodable = self._undecodable.pop(job.run_id, None)  # whatever Python runs it, its bytes do not decode
        if not job.reference_path:
            stream = self._unrunnable(job)
        elif (error := undecodable or self._syntax_error(job, runner)) is not None:
            stream = self._not_python(job, error)
        else:
            stream = runner.run(job)
        try:
            for event in stream:
                event = self.compare(event)
                if isinstance(event, RunFinished):
                    event = self._trusted(job, self._reference_moved(job, self._weak_test(job, event)))
                for consumer in self.consumers:
                    consumer(event)
                yield event
        finally:
            stream.close()  # a consumer that failed (a closed pipe) or a caller that stopped ends the run

    def _weak_test(self, job: Job, event: RunFinished) -> RunFinished:
        """``weak_test`` in the summary when a cached ``ktui audit`` of this reference version says
        its test is weak: read from .ktui/audits/, never audited here (not on the save-to-verdict path)."""
        weak = weak_test(self.state, job.reference_hash)
        if weak is not None:
            event.summary = {**event.summary, "weak_test": weak["reason"], "weak_test_reasons": weak["reasons"]}
        return event

    def _trusted(self, job: Job, event: RunFinished) -> RunFinished:
        """``trusted`` in the summary (``ktui.dispatch.trust``: the one rule), from the run's figures and
        the audit record of its reference version as it is now; a surface showing the run later asks again."""
        event.summary = with_trust(event.summary, current(self.state, event.verdict, event.summary, job.reference_hash))
        return event

    def _reference_moved(self, job: Job, event: RunFinished) -> RunFinished:
        """The run was judged by the reference as snapshotted (``job.reference_hash``); say so when
        the files on disk differ by now (``reference_changed``: the caller may run it again; files
        removed since leave the verdict standing, judged by what was read). A run
        that is itself such a second run, during which the reference was written again, is
        suspicious: what keeps rewriting it is most likely the kernel's own code."""
        written = self._written.pop(job.run_id, None)
        rerun = job.run_id in self._reruns
        self._reruns.discard(job.run_id)
        if not job.reference_files or event.verdict == CANCELLED:
            return event
        now = reference_on_disk(list(job.reference_files))
        reference = Path(job.reference_path).name
        if rerun and written is not None and reference_stat([Path(p) for p in job.reference_files]) != written:
            why = (f"{reference} was written again during this second run, after it changed during the first: most "
                   f"likely the kernel's own code rewrites its reference (judged against the recorded {job.reference_hash})")
            event.verdict, event.message = SUSPICIOUS, why
            event.summary = {**event.summary, "first_failure": first_failure("reference", SUSPICIOUS, why)}
        gone = not all(Path(p).exists() for p in job.reference_files)  # removed, not changed: no newer reference to run against
        if now != job.reference_hash and not gone:
            event.summary = {**event.summary, "reference_changed": {"recorded": job.reference_hash, "now": now}}
        return event

    def mark_again(self, job: Job) -> None:
        """``job`` runs again because its reference changed during the previous run of its kernel."""
        self._reruns.add(job.run_id)

    def run(self, kernel: Kernel, options: Options, again: bool = False) -> RunFinished:
        """One run of ``kernel``; ``again``: a second run because its reference changed during the first."""
        finished = None
        job = self.prepare(kernel, options)
        if again:
            self.mark_again(job)
        for event in self.events(job):
            if isinstance(event, RunFinished):
                finished = event
        assert finished is not None
        return finished

    def _unrunnable(self, job: Job) -> Iterator[Event]:
        """A kernel with no reference never reaches a worker: ktui cannot judge it."""
        yield from never_ran(job, ERROR, job.reference_error, rung="pre-checks")

    @staticmethod
    def _syntax_error(job: Job, runner: Runner) -> ErrorInfo | None:
        """The kernel's or the reference's syntax error, found by compiling their text here (no user
        code runs) when the worker runs this same Python: reported without waiting for a worker.
        A worker elsewhere (``--remote``, Ray) may run another Python, whose grammar decides there."""
        if not runner.runs_here:
            return None
        files = [(job.source, job.kernel_path)]
        try:
            files.append((Path(job.reference_path).read_text(encoding="utf-8", errors="replace"), job.reference_path))
        except OSError:
            pass  # the worker says why it cannot read it
        for source, path in files:
            exc = syntax_error(source, path)
            if exc is not None:
                return syntax_error_info(exc)
        return None

    def _not_python(self, job: Job, error: ErrorInfo) -> Iterator[Event]:
        """A file that does not compile fails the pre-checks as the worker would fail them, at its line."""
        yield from never_ran(job, FAILED, f"{error.type}: {error.message}", rung="pre-checks", error=error,
                             finish_message="")

    def close(self) -> None:
        self.runner.close()
        self.store.close()


def _unless_disk_full(consumer: Consumer, store: Store) -> Consumer:
    """``consumer`` (the report files), which a full disk stops, said once, instead of the run."""
    def consume(event: Event) -> None:
        if not store.recording:
            return
        try:
            consumer(event)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            store.stop_recording(exc)

    return consume
