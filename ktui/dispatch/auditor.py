"""``ktui audit``'s parent side: which references to audit, the audit process, and its cache.

A path names references the way ``ktui run`` names kernels: a reference file (``references/<op>.py``,
a KernelBench problem, a GPU MODE ``reference.py``), a kernel (its reference is audited), a GPU MODE
problem folder, a workspace or a folder of problems. Each reference is audited in
``python -m ktui.worker.audit`` (user code runs there, never here), a warm process kept for the whole
command like ``ktui run``'s worker (``WorkerProcess``: its own session, its tree ended with it). A
step that hangs is ended by the process's own watchdog, with the user's line; one that holds the
interpreter, by this side's longer limit. The verdict is cached in ``.ktui/audits/<reference
hash>.json`` — the hash a run of the reference's kernels records, so ``ktui run`` can say
``weak test`` from the cache alone (``weak_test``), never auditing on the way to a verdict.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ktui.dispatch.readable import ReadRules
from ktui.dispatch.transport import Command, LocalProcess
from ktui.dispatch.worker_protocol import WorkerProcess
from ktui.protocol.bounds import QUOTE_CHARS, cut
from ktui.protocol.events import ERROR, FAILED, Event, Output, RunFinished, RungFinished, event_from_json
from ktui.protocol.files import write_atomic
from ktui.protocol.job import GPUMODE, KERNELBENCH, NATIVE, Job, Options
from ktui.protocol.processes import describe_exit
from ktui.protocol.sourcelines import parse as parse_python
from ktui.protocol.statedir import StateError, audit_file, state_folder
from ktui.workspace import formats
from ktui.workspace.kernels import (
    Kernel,
    ProblemError,
    discover,
    find_root,
    is_candidate_file,
    kernel_for,
    reference_hash,
    state_dir,
)

AUDIT_VERSION = 2  # a cached audit from another version of the audit is done again (2: declared seeds)
STRONG, WEAK = "strong", "weak"
DEFAULT_STEP_TIMEOUT_S = 120.0
PARENT_GRACE_S = 30.0  # beyond the process's own step limit, before this side kills it


@dataclass(frozen=True)
class AuditTarget:
    """One reference to audit, with what its format needs (GPU MODE's task.yml shapes and files)."""

    name: str
    reference: Path
    root: Path  # whose .ktui/ caches the audit: where `ktui run` of its kernels keeps their history
    format: str = NATIVE
    problem: dict[str, Any] = field(default_factory=dict, compare=False)
    dependencies: tuple[Path, ...] = ()

    def hash(self) -> str:
        return reference_hash(Kernel(path=self.reference, root=self.root, reference=self.reference,
                                     format=self.format, problem=self.problem, dependencies=self.dependencies))


@dataclass(frozen=True)
class AuditOptions:
    arch: str | None = None
    force_cpu: bool = False
    seed: int | None = None
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    shapes: int | None = None  # only the first N test shapes (KernelBench: trials)
    fresh: bool = False  # audit again even when a cached verdict exists
    cache: bool = True  # False: neither read nor write .ktui/ (a corpus checkout that is not ours)
    fast: bool = False  # only the fast checks (``ktui run``'s first audit); a full audit's record serves too


# -- which references ------------------------------------------------------------------------------
def find_targets(paths: list[Path], reference: Path | None = None) -> list[AuditTarget]:
    """The references ``paths`` name (and ``--reference``), each once; ProblemError says why not."""
    targets: list[AuditTarget] = []
    if reference is not None:
        if not Path(reference).is_file():
            raise ProblemError(f"{reference}: no such reference file")
        if paths:
            targets += [kernel_target(kernel_for(p, reference)) for p in paths]
        else:
            targets.append(_reference_target(Path(reference).resolve()))
    for raw in [] if reference is not None else paths:
        path = Path(raw).resolve()
        if not path.exists():
            raise ProblemError(f"{raw}: no such file or folder")
        targets += _in_folder(raw, path) if path.is_dir() else [_file_target(raw, path)]
    unique: dict[tuple[Path, Path], AuditTarget] = {}
    for t in targets:
        unique.setdefault((t.root, t.reference), t)
    return list(unique.values())


def _file_target(raw: Path, path: Path) -> AuditTarget:
    if path.suffix != ".py":
        raise ProblemError(f"{raw}: not a Python file")
    if is_reference(path):
        return _reference_target(path)
    return kernel_target(kernel_for(raw))


def is_reference(path: Path) -> bool:
    """A reference rather than a kernel, read as text: a GPU MODE reference.py, a KernelBench
    problem, a file in a workspace's references/, or one defining generate_input and ref_kernel."""
    fmt = formats.reference_format(path)
    if fmt in (GPUMODE, KERNELBENCH) or path.parent.name == "references":
        return True
    try:

        names = formats.top_level_names(parse_python(path.read_text(encoding="utf-8", errors="replace")))
    except (SyntaxError, ValueError, OSError):
        return False
    return {"generate_input", "ref_kernel"} <= names and "custom_kernel" not in names


def _reference_target(path: Path) -> AuditTarget:
    fmt = formats.reference_format(path)
    if fmt == GPUMODE:
        return _gpumode_target(path.parent)
    return AuditTarget(path.stem, path, find_root(path, fallback=path.parent), fmt)


def _gpumode_target(problem_dir: Path) -> AuditTarget:
    try:
        task = formats.read_task(problem_dir)
    except formats.FormatError as exc:
        raise ProblemError(str(exc)) from exc
    return AuditTarget(problem_dir.name, problem_dir / formats.GPUMODE_REFERENCE, problem_dir, GPUMODE,
                       task.to_job(), task.dependencies)


def kernel_target(kernel: Kernel) -> AuditTarget:
    """The reference ``kernel`` is judged against, as an audit target (the watch loop's background audits)."""
    if kernel.reference is None:
        raise ProblemError(kernel.reference_error)
    name = kernel.reference.parent.name if kernel.format == GPUMODE else kernel.reference.stem
    return AuditTarget(name, kernel.reference, kernel.root, kernel.format, dict(kernel.problem), kernel.dependencies)


def _in_folder(raw: Path, folder: Path) -> list[AuditTarget]:
    if formats.is_gpumode_problem(folder):
        return [_gpumode_target(folder)]
    refs = folder / "references" if (folder / "references").is_dir() else folder
    found = [_gpumode_target(p) for p in sorted(refs.iterdir()) if p.is_dir() and formats.is_gpumode_problem(p)]
    found += [_reference_target(p) for p in sorted(refs.glob("*.py"))
              if is_candidate_file(p.relative_to(refs)) and is_reference(p)]
    if not found:  # a folder of kernels: the references they are judged against
        try:
            found = [kernel_target(k) for k in discover([raw])]
        except ProblemError:
            raise ProblemError(f"{raw}: no reference here (references/<op>.py, a KernelBench problem, GPU MODE "
                               "problem folders with reference.py and task.yml, or kernels naming them)") from None
    return found


# -- the cache -------------------------------------------------------------------------------------
def cached(state: Path, digest: str, shapes: int | None = None, any_shapes: bool = False,
           fast_ok: bool = False) -> dict | None:
    """The stored audit of the reference version ``digest`` in the ``.ktui/`` folder ``state``, if
    one is current: this audit's version, and the same number of shapes unless ``any_shapes``. A
    record of the fast checks only (``ktui run``'s) is one only where ``fast_ok``: a full audit
    must not take its ``strong`` for its own."""
    try:
        record = json.loads(audit_file(state, digest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("audit_version") != AUDIT_VERSION:
        return None
    if not any_shapes and record.get("shapes") != shapes:
        return None
    if record.get("fast") and not fast_ok:
        return None
    return record


def weak_test(state: Path, digest: str) -> dict | None:
    """``{"reason": …, "reasons": […]}`` when the cached audit of this reference version says weak;
    None otherwise (or when it was never audited). Reads one small file: no audit runs here."""
    record = cached(state, digest, any_shapes=True, fast_ok=True) if digest else None  # fast checks' weak is weak
    if record is None or record.get("verdict") != WEAK:
        return None
    reasons = record.get("reasons") or []
    return {"reason": reasons[0] if reasons else "", "reasons": reasons}


def _store(target: AuditTarget, digest: str, options: AuditOptions, events: list[Event]) -> None:
    finish = events[-1]
    assert isinstance(finish, RunFinished)
    record = {"audit_version": AUDIT_VERSION, "reference": str(target.reference), "reference_hash": digest,
              "shapes": options.shapes, "fast": options.fast, "verdict": finish.verdict, "reasons": finish.summary.get("reasons", []),
              "audited": finish.time, "events": [e.to_json() for e in events]}
    try:
        write_atomic(audit_file(state_dir(target.root), digest), json.dumps(record, default=str, allow_nan=False))
    except OSError as exc:  # a read-only workspace: the verdict stands, uncached
        folder = audit_file(state_folder(target.root), digest).parent
        raise StateError(f"{folder} cannot be written ({exc.strerror}): keep ktui's state elsewhere with "
                         "--state-dir DIR") from None


# -- the audit process -----------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditConfig:
    """The audit process's command line, spoken to as a worker is (``WorkerProcess``)."""

    options: AuditOptions
    readable: tuple[str, ...] = ()  # the workspaces (and files elsewhere) it reads (``dispatch.readable``)

    def command(self) -> Command:
        """It sees every GPU, and writes nothing of the workspaces it reads."""
        return Command("ktui.worker.audit", tuple(self._args()), readable=self.readable)

    def _args(self) -> list[str]:
        args = ["--timeout", f"{self.options.step_timeout_s:g}"]
        if self.options.arch:
            args += ["--arch", self.options.arch]
        if self.options.force_cpu:
            args.append("--cpu")
        if self.options.shapes:
            args += ["--shapes", str(self.options.shapes)]
        if self.options.fast:
            args.append("--fast")
        return args


class Auditor:
    """Audits targets one after another in one warm audit process (replaced after a crash or a hang)."""

    def __init__(self, options: AuditOptions | None = None):
        self.options = options or AuditOptions()
        self._process: WorkerProcess | None = None
        self._reads = ReadRules()  # what its process may read: the workspaces audited so far
        self._lock = threading.Lock()  # ``cancel`` comes from another thread
        self._cancelled = False
        self.not_cached = ""  # why the last verdict could not be cached (a read-only workspace), if it could not

    def audit(self, target: AuditTarget) -> Iterator[Event]:
        """The audit's events: ``run_started``, one ``rung_finished`` per check, ``run_finished``."""
        try:
            digest = target.hash()
            source = target.reference.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ProblemError(f"{target.reference}: cannot read: {exc.strerror}") from exc
        reuse = self.options.cache and not self.options.fresh
        self.not_cached = ""
        record = cached(state_folder(target.root), digest, self.options.shapes, fast_ok=self.options.fast) if reuse else None
        if record is not None:
            yield from _replayed(record)
            return
        job = Job(run_id=uuid.uuid4().hex, kernel_id=target.name, kernel_path=str(target.reference),
                  reference_path=str(target.reference), reference_error="", reference_hash=digest,
                  root=str(target.root), version=0, content_hash=digest, source=source, run_dir="",
                  options=Options(arch=self.options.arch, force_cpu=self.options.force_cpu, seed=self.options.seed),
                  format=target.format, problem=dict(target.problem))
        if self._reads.admit(job):  # its confinement is fixed at its start: one that may not read this is replaced
            self._discard()
        events: list[Event] = []
        for event in self._follow(job):
            if not isinstance(event, Output):
                events.append(event)
            yield event
        finish = events[-1] if events else None
        if self.options.cache and isinstance(finish, RunFinished) and finish.verdict in (STRONG, WEAK):
            try:
                _store(target, digest, self.options, events)
            except StateError as exc:
                self.not_cached = str(exc)

    def _follow(self, job: Job) -> Iterator[Event]:
        process = self._ready()
        process.send(job)
        started, step, finished = time.monotonic(), "starting the audit", False
        limit = self.options.step_timeout_s + PARENT_GRACE_S
        deadline = time.monotonic() + limit
        while True:
            try:
                kind, payload = process.messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._discard()
                if not finished:
                    yield from _failure(job, f"{step}: no answer within {limit:g} s; the audit process was killed",
                                        started)
                return
            if kind == "stderr":
                yield Output(job.run_id, text=payload)
                continue
            if kind == "eof":
                status = process.exit_status()
                last = process.last_output(lines=40)
                self._discard()
                if not finished:
                    yield from _failure(job, _died(step, status, last, job, process.killed_by_oom()),
                                        started)
                return
            if kind != "msg":
                continue
            deadline = time.monotonic() + limit
            if payload.get("type") == "audit_step":
                step = payload.get("step", step)
                continue
            if payload.get("type") == "job_done":
                return
            event = event_from_json(payload)
            finished = finished or isinstance(event, RunFinished)
            if finished:  # the watchdog's report comes before the process exits: a short wait is enough
                deadline = time.monotonic() + 5.0
            yield event

    def _ready(self) -> WorkerProcess:
        if self._process is None or not self._process.alive():
            self._discard()
            process = WorkerProcess(LocalProcess(AuditConfig(self.options, self._reads.paths).command()))
            with self._lock:
                self._process, cancelled = process, self._cancelled
            if cancelled:  # cancelled while it started: it never gets a job
                process.kill()
            process.wait_ready()
        return self._process

    def cancel(self) -> None:
        """From any thread: kill the audit process now, and any this auditor would start later. The
        audit in flight ends ``error`` (never cached); the caller's thread returns once it is reaped."""
        with self._lock:
            self._cancelled = True
            process = self._process
        if process is not None:
            process.kill()

    def _discard(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            process.kill()

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            process.close()


def _replayed(record: dict) -> Iterator[Event]:
    events = [event_from_json(e) for e in record.get("events", [])]
    for event in events:
        if isinstance(event, RunFinished):
            event.summary = {**event.summary, "cached": {"audited": record.get("audited")}}
        yield event


def _failure(job: Job, message: str, started: float) -> Iterator[Event]:
    yield RungFinished(job.run_id, rung="audit", status=FAILED, message=message)
    yield RunFinished(job.run_id, verdict=ERROR, message=message, summary={"verdict": ERROR, "reasons": [],
                                                                           "error": message},
                      duration_s=round(time.monotonic() - started, 3))


def _died(step: str, code: int | None, last: list[str], job: Job, oom: str = "") -> str:
    """The process died in user code (a segfault): the step, the exit, and the user's line from the
    stack faulthandler printed; ``oom``: the evidence that the out-of-memory killer ended it."""
    message = f"{step}: the audit process died ({describe_exit(code)})" + (f": {oom}" if oom else "")
    user = {job.reference_path, *job.problem.get("modules", {}).values()}
    for line in last:  # faulthandler: '  File "/path/reference.py", line 12 in ref_kernel', innermost first
        text = line.strip()
        if text.startswith('File "'):
            file, _, rest = text[6:].partition('", line ')
            if file in user:
                number, _, function = rest.partition(" in ")
                return f"{message} in {function} at {Path(file).name}:{number}"
    return f"{message}; its last output: {cut(last[-1].strip(), QUOTE_CHARS)}" if last else message
