"""The typed events of a run and their JSON form.

Everything ktui shows — the CLI's lines, the dashboard's panes, the history store — is built
from this one stream. Each event is a dataclass; ``to_json`` gives a flat dict with a ``type``
field, and ``event_from_json`` turns such a dict back into the dataclass, so the stream can cross
a process boundary (the worker) or a file (``--json``) and come back unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ktui.protocol.bounds import LINE_CHARS, MESSAGE_LINE_CHARS, TRACEBACK_CHARS, cut, cut_message

# Rung statuses.
OK = "ok"
FAILED = "failed"
SKIPPED = "skipped"
SUSPICIOUS = "suspicious"
CRASHED = "crashed"
TIMED_OUT = "timed_out"
CANCELLED = "cancelled"

# Run verdicts.
PASSED = "passed"
COMPILED = "compiled"  # compiled and dumped, never run: a kernel of a DSL the CPU tier does not run (exit 0, not a pass)
ERROR = "error"  # ktui could not judge the kernel (no reference, bad path; as a rung's status: the reference raised)
INTERRUPTED = "interrupted"  # left "running" by a ktui process that was killed (see ktui.history.store)
RUNNING = "running"  # the history's verdict of a run not yet finished


def finished_run(verdict: str) -> bool:
    """Whether a run with ``verdict`` says something of its version: the one definition of a
    finished run. A run still going, cancelled or interrupted says nothing."""
    return verdict not in (RUNNING, CANCELLED, INTERRUPTED)



def compile_only_text(arch: str, dsls: str) -> str:
    """What a ``compiled`` run checked, in the words every surface uses (the header, the summary)."""
    return f"CPU tier: {dsls} compiled for {arch} only, not run"


def first_failure(rung: str, status: str, message: str) -> dict[str, str]:
    """``summary["first_failure"]``: the rung that decided a run's verdict, and the first line of
    why (the one line the CLI's summary, ``ktui history`` and the dashboard's list show)."""
    return {"rung": rung, "status": status, "message": cut(message.splitlines()[0], MESSAGE_LINE_CHARS) if message else ""}

@dataclass
class SourceLocation:
    """A place in a user's file, with the lines around it for display."""

    file: str
    line: int
    col: int | None = None
    excerpt: str = ""  # a few numbered source lines ending with a caret line where col is known
    first_line: int | None = None  # line number of the excerpt's first line


@dataclass
class ErrorInfo:
    """What went wrong inside a rung: enough to read the failure without re-running."""

    type: str
    message: str
    traceback: str = ""
    location: SourceLocation | None = None

    def __post_init__(self) -> None:  # the exception's text is the user's: bounded (ktui.protocol.bounds)
        self.message = cut_message(self.message)
        self.traceback = cut_message(self.traceback, TRACEBACK_CHARS, keep_end=True)

    @classmethod
    def from_json(cls, data: dict | None) -> ErrorInfo | None:
        if not data:
            return None
        loc = data.get("location")
        return cls(
            type=data["type"],
            message=data["message"],
            traceback=data.get("traceback", ""),
            location=SourceLocation(**loc) if loc else None,
        )


@dataclass
class Event:
    type: ClassVar[str] = "event"
    run_id: str
    time: float = field(default_factory=time.time, kw_only=True)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {"type": self.type, **data}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), default=_json_default, allow_nan=False)


@dataclass
class RunStarted(Event):
    """A version of a kernel begins its ladder."""

    type: ClassVar[str] = "run_started"
    kernel: str  # kernel id: its path relative to kernels/ without .py
    path: str  # absolute path of the kernel file
    version: int
    content_hash: str
    reference: str  # absolute path of the reference file ("" if none resolved)
    reference_hash: str
    tier: str  # "gpu" | "cpu"
    device: str  # e.g. "NVIDIA H200" or "CPU (Triton interpreter)"
    arch: str  # e.g. "sm_90a"
    run_dir: str
    strict: bool = False
    gpu: str = ""  # which GPU of the host ran it (its index), "" when not known or the CPU tier
    gpu_uuid: str = ""
    confined: bool | None = None  # whether user code ran in its sandbox (None: not known)
    confinement: str = ""  # the protections that held, "landlock ABI 7: writes, reads, network, signals" (docs/sandbox.md), or "not confined: <why>"


@dataclass
class RungStarted(Event):
    """A rung begins, with the time limit it runs under. The same rung may say it again while it
    runs, with a ``note`` of what it is doing (the benchmark's one-time calibration of the GPU, step
    by step): its time limit then counts from there."""

    type: ClassVar[str] = "rung_started"
    rung: str
    timeout_s: float | None = None
    note: str = ""  # what the rung is doing, when it says so again while it runs; "" when it begins


@dataclass
class RungFinished(Event):
    """A rung's result: its status, its figures, and the failure if there was one."""

    type: ClassVar[str] = "rung_finished"
    rung: str
    status: str
    figures: dict[str, Any] = field(default_factory=dict)
    message: str = ""  # one line: why it failed / was skipped, or a short note
    error: ErrorInfo | None = None
    duration_s: float = 0.0
    phases_s: dict[str, float] = field(default_factory=dict)  # where duration_s went (inputs, candidate, ...)

    def __post_init__(self) -> None:  # may quote what user code printed or raised: bounded
        self.message = cut_message(self.message)

    @property
    def ok(self) -> bool:
        return self.status == OK


@dataclass
class ArtifactWritten(Event):
    """A file a run wrote for humans and agents to read (IR, PTX, SASS, reports)."""

    type: ClassVar[str] = "artifact"
    kind: str  # a compiler output's suffix ("ptx", "cubin", "ttir"…: ktui.protocol.dsls), "sass", "resources" or "hotspots" (.json and .txt)
    path: str
    function: str = ""  # the GPU kernel function it belongs to, if any
    bytes: int = 0


@dataclass
class Output(Event):
    """Text the user's code printed (stdout/stderr of the worker), forwarded line by line."""

    type: ClassVar[str] = "output"
    text: str
    stream: str = "stderr"

    def __post_init__(self) -> None:  # one printed line: its start kept, never dropped whole
        self.text = cut(self.text, LINE_CHARS)


@dataclass
class RunFinished(Event):
    """A version's ladder ended: its verdict, and the summary every surface shows."""

    type: ClassVar[str] = "run_finished"
    verdict: str
    message: str = ""  # why a run ended other than by its ladder (crashed, cancelled, error); a failed rung: summary["first_failure"]
    summary: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    def __post_init__(self) -> None:  # a crash quotes what user code printed last: bounded
        self.message = cut_message(self.message)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls for cls in (RunStarted, RungStarted, RungFinished, ArtifactWritten, Output, RunFinished)
}


def event_from_json(data: dict[str, Any]) -> Event:
    """Rebuild an event from its JSON dict (the inverse of ``Event.to_json``)."""
    data = dict(data)
    kind = data.pop("type")
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}")
    if cls is RungFinished:
        data["error"] = ErrorInfo.from_json(data.get("error"))
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})


def _json_default(value: Any) -> Any:
    """Figures may hold numpy/torch scalars or non-finite floats; keep the JSON strict."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    return str(value)


def clean_figures(figures: dict[str, Any]) -> dict[str, Any]:
    """Make figures JSON-safe: non-finite floats become strings ("nan", "inf"), scalars plain."""

    def clean(v: Any) -> Any:
        if isinstance(v, float):
            if v != v:
                return "nan"
            if v in (float("inf"), float("-inf")):
                return "inf" if v > 0 else "-inf"
            return v
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if hasattr(v, "item") and not isinstance(v, (str, bytes)):
            try:
                return clean(v.item())
            except Exception:
                return str(v)
        return v

    return {str(k): clean(v) for k, v in figures.items()}
