"""What the run queue, the watch loop and the dashboard's tasks say besides the runs' own events.

Every notice is here, each with its own type name: the dashboard draws them, ``ktui watch
--headless`` and a viewer of the workspace's daemon receive them as JSON lines, and
``notice_from_json`` reads them back. Their schema is generated with the events'
(``ktui.protocol.schema``).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Notice:
    """Something the run queue (or the watch loop) says besides the loop's own events."""

    type: ClassVar[str] = "notice"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


# -- the run queue --------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueueChanged(Notice):
    """What runs and what waits, at each change of the run queue."""

    type: ClassVar[str] = "queue"
    running: str | None  # kernel id of the run in flight (the first GPU's, with several)
    queued: tuple[str, ...] = ()  # kernel ids waiting, in order
    cancelling: bool = False  # a run in flight is stale and being cancelled
    background: str | None = None  # what background work is in flight ("auditing relu"), not a kernel's run
    also_running: tuple[str, ...] = ()  # with several GPUs: the kernels running on the others
    seq: int = 0  # the order the snapshots were taken in: a listener may receive an older one after a newer one (keep the newer)


@dataclass(frozen=True)
class RunnerReady(Notice):
    """Where runs happen, known once the worker has started."""

    type: ClassVar[str] = "runner_ready"
    tier: str
    device: str
    arch: str
    gpus: tuple[str, ...] = ()  # with several GPUs: the index of each, one worker per GPU
    confined: bool | None = None  # whether the worker confines user code (``ktui.worker.confine``)
    confinement: str = ""  # "landlock ABI 7: writes, reads, network, signals" or "not confined: <why>" (protocol.sandbox)


@dataclass(frozen=True)
class JobProblem(Notice):
    """A job that could not run at all (file vanished, worker would not start)."""

    type: ClassVar[str] = "job_problem"
    kernel: str
    message: str


# -- the watch loop ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Saved(Notice):
    """A file was saved with new content (or removed) and these kernels are affected."""

    type: ClassVar[str] = "saved"
    path: str
    kernels: tuple[str, ...]
    content_hash: str | None  # None: the file was removed
    dependency: bool = False  # a reference or another file the kernels depend on, not a kernel itself


@dataclass(frozen=True)
class WatchStateChanged(Notice):
    """How the workspace's files are watched: inotify, polling (and why), or not at all."""

    type: ClassVar[str] = "watcher_state"
    mode: str  # "inotify" | "polling" | "stopped"
    reason: str = ""
    folders: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkspaceNote(Notice):
    """Why there is nothing (or not everything) to run: no kernels/, no kernel files, no references/."""

    type: ClassVar[str] = "workspace_note"
    message: str


@dataclass(frozen=True)
class RerunsStopped(Notice):
    """A kernel kept rewriting a file during its own runs: it is not re-run until saved again."""

    type: ClassVar[str] = "reruns_stopped"
    kernel: str
    path: str  # the file it rewrote last
    message: str


@dataclass(frozen=True)
class AuditFinished(Notice):
    """The audit of one reference version: ``strong``, ``weak`` (with why) or ``error``."""

    type: ClassVar[str] = "audit_finished"
    reference: str  # the reference file
    reference_hash: str  # the version audited: what a run of its kernels records
    kernels: tuple[str, ...]  # the kernels judged against it
    verdict: str  # strong | weak | error
    reasons: tuple[str, ...] = ()  # why it is weak
    message: str = ""  # why it could not be audited
    cached: bool = False  # told from .ktui/audits/, not audited now


# -- the dashboard's tasks --------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfileProgress(Notice):
    """A line of progress of the dashboard's profile of a kernel (``ktui profile`` in a child)."""

    type: ClassVar[str] = "profile_task"
    kernel: str
    message: str


@dataclass(frozen=True)
class ProfileFinished(Notice):
    """The dashboard's profile of a kernel ended: its summary, or why there is none."""

    type: ClassVar[str] = "profile_task_finished"
    kernel: str
    ok: bool
    message: str
    summary: dict[str, Any] | None = field(default=None)


NOTICE_TYPES: dict[str, type[Notice]] = {cls.type: cls for cls in (
    QueueChanged, RunnerReady, JobProblem, Saved, WatchStateChanged, WorkspaceNote, RerunsStopped, AuditFinished,
    ProfileProgress, ProfileFinished)}


def notice_from_json(data: dict[str, Any]) -> Notice:
    """The notice a JSON line holds (its tuples read back from JSON's lists); KeyError for an
    unknown type."""
    cls = NOTICE_TYPES[data["type"]]
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if isinstance(value, list) and typing.get_origin(hints[f.name]) is tuple:
            value = tuple(value)
        values[f.name] = value
    return cls(**values)
