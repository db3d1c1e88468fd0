"""``RemoteRunner``: the ``Runner`` of ``ktui.dispatch.runner`` for a worker on another host.

Before each run it syncs ktui's own package (so the remote runs exactly this version of ktui)
and the workspace into ``<remote dir>/<workspace hash>/`` (``pkg/``, ``ws/``, ``runs/``, and
``outside/`` for the GPU MODE ``files:`` modules a problem keeps beside its folder: nothing is
written outside it), rewrites the Job's paths to the remote's, runs it in a ``WorkerRunner`` whose
transport is ssh (``transport.SshProcess``), rewrites the events' paths back, copies the remote run folder
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
from ktui.dispatch.remote.transport import SshProcess
from ktui.dispatch.runner import REPLACED, Runner, WorkerConfig, WorkerRunner
from ktui.dispatch.transport import Transport
from ktui.dispatch.worker_protocol import WorkerStartError
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
from ktui.workspace.relocation import Relocation
from ktui.workspace.shipped import job_relocation, moved_job, outside_modules, outside_name, run_files

PACKAGE = Path(ktui.__file__).resolve().parent
DEFAULT_DIR = "~/.ktui-remote"


@dataclass(frozen=True)
class Staged:
    """A job made ready on the remote: its folder there, the Job as the remote sees it, its run
    folder there, and how the remote's paths turn back into ours."""

    base: str
    job: Job
    remote_run: str
    back: Relocation


class RemoteRunner(Runner):
    """Jobs staged on a remote host and run there by a warm worker over ssh (``worker``)."""

    def __init__(self, address: RemoteAddress, config: WorkerConfig | None = None, fresh_each_run: bool = False,
                 ssh_config: str | None = None, python: str = "python3", sync: str = "auto", root: Path | None = None):
        self.worker = WorkerRunner(config, fresh_each_run=fresh_each_run, launch=self._launch)
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
        return {**self.worker.describe(), "host": self.host}

    @property
    def warm(self) -> bool:
        return self.worker.warm

    @property
    def gpu(self) -> str:
        return self.worker.gpu

    def reach(self) -> str | None:
        try:
            self.link.connect()
        except LinkDown as exc:
            self.close()
            return str(exc)
        return None

    def _launch(self, config: WorkerConfig) -> Transport:
        """The worker, started by the agent in the workspace's remote folder."""
        if self._base is None:
            raise WorkerStartError(f"{self.host}: no workspace folder there yet (a run or describe makes it)")
        return SshProcess(config.command(), self.link, self._base, self.python)

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
            self.worker.discard_worker()  # its folder is another workspace's
        self._base = base
        self._setup(base)
        return base

    def stage(self, job: Job) -> Staged:
        """Everything a remote run of ``job`` needs, there: this ktui, the workspace (and its
        calibration), an empty run folder; the Job with the remote's paths. LinkDown, RuntimeError,
        ValueError or OSError when that fails. Used by runs and by the tools (profile, sanitize)."""
        local_root = job.root
        base = self.connect_to(local_root)
        names = run_files(Path(local_root))  # the workspace and its calibration
        self.syncer.send(Path(local_root), names, f"{base}/ws")
        placed = self._send_outside(job, base)
        remote_run = f"{base}/runs/{job.run_id}"
        self.link.run([*self.agent_command(base), "prepare", f"{base}/ws", remote_run],
                      input="\0".join(names).encode("utf-8", "surrogateescape"))
        data = job.to_json()
        there = job_relocation(data, f"{base}/ws", remote_run, placed)
        remote_job = Job.from_json(moved_job(data, there, "a remote run"))
        return Staged(base, remote_job, remote_run, there.back)

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
        stream = self.worker.run(remote_job)
        held: RungFinished | None = None
        try:
            for event in self._unless_link_dropped(stream, job):
                event = event_from_json(back.json(event.to_json()))
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
        if event.verdict == CRASHED and not self.worker.cancelled and not self.link.master_alive():
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

    def cancel(self, reason: str = REPLACED, run_id: str | None = None) -> None:
        self.worker.cancel(reason, run_id=run_id)

    def close(self) -> None:
        try:
            self.worker.close()
        finally:
            self.link.close()

