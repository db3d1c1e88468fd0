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

from ktui.history.reports import ReportWriter
from ktui.history.store import Store
from ktui.protocol.events import ERROR, FAILED, Event, RunFinished, RungFinished, RunStarted, first_failure
from ktui.protocol.job import Job, Options
from ktui.protocol.statedir import StateError, run_dir
from ktui.run.audit import weak_test
from ktui.run.compare import VersionComparer
from ktui.run.runner import LocalRunner, Runner
from ktui.workspace.kernels import Kernel, content_hash, reference_hash, state_dir

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
        self.runner: Runner = runner or LocalRunner()
        self.consumers: list[Consumer] = [self.store.record, _unless_disk_full(ReportWriter(self.state), self.store),
                                          *consumers]
        # Labels benchmark figures against earlier versions before anyone sees them.
        self.compare = VersionComparer(self.store, self.state)

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
        return Job(
            run_id=uuid.uuid4().hex,
            kernel_id=kernel.id,
            kernel_path=str(kernel.path),
            reference_path=str(kernel.reference) if kernel.reference else "",
            reference_error=kernel.reference_error,
            reference_hash=reference_hash(kernel),
            root=str(kernel.root),
            version=version,
            content_hash=digest,
            source=data.decode("utf-8", errors="replace"),
            run_dir=str(run_dir),
            options=options,
            format=kernel.format,
            problem=dict(kernel.problem),
        )

    def events(self, job: Job, runner: Runner | None = None) -> Iterator[Event]:
        """The run's events, labelled against the history and already handed to every consumer;
        ``runner``: where it runs when not the session's own (one GPU of several)."""
        stream = (runner or self.runner).run(job) if job.reference_path else self._unrunnable(job)
        try:
            for event in stream:
                event = self.compare(event)
                if isinstance(event, RunFinished):
                    event = self._weak_test(job, event)
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

    def run(self, kernel: Kernel, options: Options) -> RunFinished:
        finished = None
        for event in self.events(self.prepare(kernel, options)):
            if isinstance(event, RunFinished):
                finished = event
        assert finished is not None
        return finished

    def _unrunnable(self, job: Job) -> Iterator[Event]:
        """A kernel with no reference never reaches a worker: ktui cannot judge it."""
        yield RunStarted(
            job.run_id, kernel=job.kernel_id, path=job.kernel_path, version=job.version,
            content_hash=job.content_hash, reference="", reference_hash="", tier="-", device="-", arch="-", run_dir=job.run_dir,
        )
        yield RungFinished(job.run_id, rung="pre-checks", status=FAILED, message=job.reference_error)
        yield RunFinished(job.run_id, verdict=ERROR, message=job.reference_error,
                          summary={"first_failure": first_failure("pre-checks", FAILED, job.reference_error)})

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
