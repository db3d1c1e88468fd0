"""``RemoteRunner``: the ``Runner`` of ``ktui.dispatch.runner`` for a worker on another host.

Before each run it syncs ktui's own package (so the remote runs exactly this version of ktui)
and the workspace into ``<remote dir>/<workspace hash>/`` (``pkg/``, ``ws/``, ``runs/``, and
``outside/`` for the GPU MODE ``files:`` modules a problem keeps beside its folder: nothing is
written outside it), rewrites the Job's paths to the remote's, follows the remote worker as
``LocalRunner`` follows a local one, rewrites the events' paths back, copies the remote run folder
into the local one before ``run_finished``, and records the host in the run's summary
(``summary["host"]``). A link that drops ends the run ``interrupted``; the next run reconnects.
"""

from __future__ import annotations

import hashlib
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import ktui
from ktui.dispatch.never_ran import never_ran
from ktui.dispatch.remote.address import RemoteAddress
from ktui.dispatch.remote.link import Link, LinkDown
from ktui.dispatch.remote.sync import Syncer
from ktui.dispatch.remote.worker import RemoteWorker
from ktui.dispatch.runner import LocalRunner, WorkerConfig, WorkerProcess, WorkerStartError
from ktui.protocol.events import (
    CRASHED,
    ERROR,
    INTERRUPTED,
    Event,
    RunFinished,
    RungFinished,
    event_from_json,
)
from ktui.protocol.job import Job
from ktui.workspace.shipped import moved_job, moved_modules, outside_modules, outside_name, run_files

PACKAGE = Path(ktui.__file__).resolve().parent
DEFAULT_DIR = "~/.ktui-remote"


@dataclass(frozen=True)
class Staged:
    """A job made ready on the remote: its folder there, the Job as the remote sees it, its run
    folder there, and the (remote, local) path pairs that turn the remote's paths back into ours."""

    base: str
    job: Job
    remote_run: str
    back: list[tuple[str, str]]


class RemoteRunner(LocalRunner):
    def __init__(self, address: RemoteAddress, config: WorkerConfig | None = None, fresh_each_run: bool = False,
                 ssh_config: str | None = None, python: str = "python3", sync: str = "auto", root: Path | None = None):
        super().__init__(config, fresh_each_run=fresh_each_run)
        self.root = root  # the workspace ``describe`` starts the worker for (a run names its own)
        self.address = address
        self.link = Link(address, ssh_config)
        self.syncer = Syncer(self.link, sync)
        self.python = python
        self._base: str | None = None
        self._set_up: set[str] = set()  # remote folders made and given this ktui, this connection
        self._epoch = 0

    @property
    def host(self) -> str:
        return self.address.display

    def link_state(self) -> str:
        """``up``, ``down``, ``retrying (1/3)``…: the dashboard's status line."""
        return self.link.state

    def base_for(self, root: str) -> str:
        """The remote folder of the workspace at ``root`` (of this machine)."""
        directory = self.address.directory or DEFAULT_DIR
        if directory == "~" or directory.startswith("~/"):
            directory = (self.link.home or "") + directory[1:]
        digest = hashlib.sha256(f"{socket.gethostname()}:{root}".encode()).hexdigest()[:16]
        return f"{directory}/{digest}"

    def describe(self) -> dict[str, Any]:
        """The remote worker's tier and device (started if need be); WorkerStartError when the
        remote cannot be reached, as for a local worker that cannot start."""
        try:
            self.link.connect()
            if self._base is None:
                self._base = self.base_for(str(Path(self.root or Path.cwd()).resolve()))
                self._setup(self._base)
        except (LinkDown, RuntimeError, ValueError, OSError) as exc:
            raise WorkerStartError(str(exc)) from exc
        return {**self._ensure_worker().info, "host": self.host}

    def _ensure_worker(self) -> WorkerProcess:
        assert self._base is not None
        with self._lock:
            if self._worker is None or not self._worker.alive():
                if self._worker is not None:
                    self._worker.kill()
                worker = RemoteWorker(self.config, self.link, self._base, self.python)
                try:
                    worker.wait_ready()
                except BaseException:
                    worker.kill()
                    raise
                self._worker = worker
            return self._worker

    def _setup(self, base: str) -> None:
        """The workspace's remote folder, with this ktui in it: once a session (and after a reconnect)."""
        if self.link.reconnects != self._epoch:  # a new connection: the remote may have changed meanwhile
            self._set_up.clear()
            self._epoch = self.link.reconnects
        if base in self._set_up:
            return
        self.link.run(["mkdir", "-p", "--", f"{base}/pkg", f"{base}/ws", f"{base}/runs"])
        self.syncer.mirror(PACKAGE, f"{base}/pkg/ktui")
        self._set_up.add(base)

    def connect_to(self, root: str) -> str:
        """Connect, and give the remote folder of the workspace at ``root`` this ktui; its path."""
        self.link.connect()
        base = self.base_for(root)
        if base != self._base:
            self._discard_worker()  # its folder is another workspace's
        self._base = base
        self._setup(base)
        return base

    def stage(self, job: Job) -> Staged:
        """Everything a remote run of ``job`` needs, there: this ktui, the workspace (and its
        calibration), an empty run folder; the Job with the remote's paths. LinkDown, RuntimeError,
        ValueError or OSError when that fails. Used by runs and by the tools (profile, sanitize)."""
        local_root, local_run = job.root, job.run_dir
        base = self.connect_to(local_root)
        names = run_files(Path(local_root))  # the workspace and its calibration
        self.syncer.send(Path(local_root), names, f"{base}/ws")
        placed = self._send_outside(job, base)
        remote_run = f"{base}/runs/{job.run_id}"
        self.link.run([*self.agent_command(base), "prepare", f"{base}/ws", remote_run],
                      input="\0".join(names).encode("utf-8", "surrogateescape"))
        moved = moved_job(job.to_json(), local_root, f"{base}/ws", local_run, remote_run, "a remote run")
        remote_job = Job.from_json(moved_modules(moved, placed))
        back = [(remote_run, local_run), *((there, here) for here, there in placed.items()), (f"{base}/ws", local_root)]
        return Staged(base, remote_job, remote_run, back)

    def _send_outside(self, job: Job, base: str) -> dict[str, str]:
        """The job's GPU MODE modules kept outside its workspace, each synced to
        ``<base>/outside/<outside_name>``; local path → remote path."""
        placed = {original: f"{base}/outside/{outside_name(original)}" for original in outside_modules(job.root, [job.problem])}
        for original in placed:
            if not Path(original).is_file():
                raise ValueError(f"{original}: named by the problem's task.yml (files:) but not a file here")
        if placed:
            self.link.run(["mkdir", "-p", "--", *{there.rsplit("/", 1)[0] for there in placed.values()}])
        for original, there in placed.items():
            self.syncer.send(Path(original).parent, [Path(original).name], there.rsplit("/", 1)[0])
        return placed

    def fetch_run(self, staged: Staged, local_run: str) -> None:
        """The remote run folder's files into the local one, as a local run leaves them; then
        the remote copy is removed."""
        self.syncer.fetch(staged.remote_run, Path(local_run))
        self.link.run(["rm", "-rf", "--", staged.remote_run], check=False)

    def run(self, job: Job) -> Iterator[Event]:
        local_run = job.run_dir
        try:
            staged = self.stage(job)
        except (LinkDown, RuntimeError, ValueError, OSError) as exc:
            yield from self._not_started(job, exc)
            return
        remote_job, remote_run, back = staged.job, staged.remote_run, staged.back
        stream = super().run(remote_job)
        held: RungFinished | None = None
        try:
            for event in self._unless_link_dropped(stream, job):
                event = _rewrite(event, back)
                if isinstance(event, RungFinished) and event.status == CRASHED:
                    held = event  # decided with the run's end: a crash or a dropped link
                    continue
                if isinstance(event, RunFinished):
                    event = self._finish(event, held, remote_run, local_run)
                    if held is not None:
                        yield held
                yield event
        finally:
            stream.close()

    def _unless_link_dropped(self, stream: Iterator[Event], job: Job) -> Iterator[Event]:
        """``stream``, where a worker that could not start because the link dropped ends the run
        ``interrupted`` instead of raising (a worker that fails to start on a live link still raises)."""
        try:
            first = next(stream, None)
        except WorkerStartError as exc:
            if self.link.master_alive():
                raise
            yield from self._not_started(job, LinkDown(f"the link to {self.host} dropped while its worker started: {exc}"))
            return
        if first is not None:
            yield first
            yield from stream

    def _finish(self, event: RunFinished, held: RungFinished | None, remote_run: str, local_run: str) -> RunFinished:
        if event.verdict == CRASHED and not self._cancelled.is_set() and not self.link.master_alive():
            self.link.state = "down"
            where = held.rung if held is not None else "the ladder"
            message = (f"the link to {self.host} dropped during {where}; the remote worker was ended "
                       "with its ssh session, and the next run reconnects")
            event.verdict, event.message = INTERRUPTED, message
            event.summary = {**event.summary, "first_failure": {"rung": where, "status": INTERRUPTED, "message": message}}
            if held is not None:
                held.status, held.message = INTERRUPTED, message
        else:  # what the worker wrote comes back, as a local run leaves it (a cancelled run's part too)
            try:
                self.syncer.fetch(remote_run, Path(local_run))
                self.link.run(["rm", "-rf", "--", remote_run], check=False)
            except (LinkDown, RuntimeError, OSError) as exc:
                event.message = (event.message + "\n" if event.message else "") + f"the run folder did not come back: {exc}"
        event.summary = {**event.summary, "host": self.host}
        return event

    def agent_command(self, base: str) -> list[str]:
        """``python -m ktui.dispatch.remote.agent`` with the synced ktui first on the remote's path."""
        return [*self.python_command(base), "-m", "ktui.dispatch.remote.agent"]

    def python_command(self, base: str) -> list[str]:
        """The remote's Python with the synced ktui importable (``base`` from ``connect_to``)."""
        return ["env", f"PYTHONPATH={base}/pkg", "PYTHONUNBUFFERED=1", self.python]

    def _not_started(self, job: Job, exc: Exception) -> Iterator[Event]:
        verdict = INTERRUPTED if isinstance(exc, LinkDown) else ERROR
        message = str(exc)
        yield from never_ran(job, verdict, message, device=self.host, summary={"host": self.host})

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.link.close()


def _rewrite(event: Event, pairs: list[tuple[str, str]]) -> Event:
    """An event from the remote with the remote's paths (in any text) as the local ones."""
    def back(value: Any) -> Any:
        if isinstance(value, str):
            for remote, local in pairs:
                value = value.replace(remote, local)
            return value
        if isinstance(value, dict):
            return {k: back(v) for k, v in value.items()}
        if isinstance(value, list):
            return [back(v) for v in value]
        return value

    return event_from_json(back(event.to_json()))
