"""How a worker's process is started, signalled and ended, and how its exit status is known.

A transport carries the worker protocol (``ktui.dispatch.worker_protocol``: a job as one JSON line
in, events as JSON lines out, printed output on stderr) and knows nothing of it. ``LocalProcess``
is a child of this process; ``remote.transport.SshProcess`` is ``ssh host agent launch``, whose
pipes are the remote worker's; a Ray actor holds a ``LocalProcess`` on its own node. A transport
also starts ktui's own processes beside its worker, on the same host and for the same GPU, not
confined (``beside``: the calibration's measuring process the worker asks for).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import IO

from ktui.dispatch.oom import OomWatch
from ktui.dispatch.proc import child_env, end_tree
from ktui.protocol import processes


@dataclass(frozen=True)
class Command:
    """What a worker process runs (``python -m module *args``) and what it may touch: ``env`` on top
    of the parent's (a pinned GPU), the folders it may write and read (``ktui.worker.confine``)."""

    module: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()

    def argv(self, python: str = sys.executable) -> list[str]:
        return [python, "-m", self.module, *self.args]


class Transport(ABC):
    """One worker process's pipes and life, wherever it runs."""

    stdin: IO[str]
    stdout: IO[str]
    stderr: IO[str]

    @abstractmethod
    def poll(self) -> int | None:
        """None while the process runs."""

    @abstractmethod
    def wait(self) -> None:
        """Until the process has ended."""

    @property
    @abstractmethod
    def returncode(self) -> int | None:
        """The worker's exit status once it ended (negative: the signal that ended it)."""

    @abstractmethod
    def signal(self, signum: int) -> None:
        """Send ``signum`` to the worker itself (a stack request)."""

    @abstractmethod
    def kill(self) -> None:
        """Kill the worker and everything it started; safe on a worker that is already dead."""

    @abstractmethod
    def close(self) -> None:
        """End the worker for good, at once, not waiting for its teardown."""

    def aside(self, line: str) -> bool:
        """Whether ``line`` of stderr is the transport's own (not the worker's output): consumed."""
        return False

    @abstractmethod
    def beside(self, command: Command) -> subprocess.Popen:
        """``command`` started beside the worker: on its host, for its GPU, in a session of its own,
        not confined, with no input; its stdout and stderr piped here as text. It runs ktui's code,
        never user code (the calibration's measuring process). ``end_tree`` ends it."""

    @abstractmethod
    def job_started(self) -> None:
        """A job was sent (what an out-of-memory kill is counted from)."""

    @abstractmethod
    def killed_by_oom(self) -> str:
        """Evidence that the out-of-memory killer ended this dead worker, in words; "" with none."""


class LocalProcess(Transport):
    """A child process of this one, in its own process group, with a private temp folder and a
    token its descendants inherit, so that what it started is found and ended with it."""

    def __init__(self, command: Command):
        self.command = command
        self.token = uuid.uuid4().hex
        # Its private temp folder is made and removed here: confined, it could not remove it itself.
        self.tmp = tempfile.mkdtemp(prefix="ktui-worker-")
        env = child_env({**_tree_env(self.token), **command.env, processes.TMP_ENV: self.tmp,
                         processes.WRITABLE_ENV: os.pathsep.join(command.writable),
                         processes.READABLE_ENV: os.pathsep.join(command.readable)})
        self.popen = subprocess.Popen(
            command.argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            env=env,
            start_new_session=True,  # its own process group: killing it kills what user code spawned
        )
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        self.stdin, self.stdout, self.stderr = self.popen.stdin, self.popen.stdout, self.popen.stderr
        self.pid = self.popen.pid
        self.oom = OomWatch.of(self.pid)  # a SIGKILL's likely sender, found when it dies

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self) -> None:
        self.popen.wait()

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        """Also what was started in sessions of its own, and what was reparented away from it."""
        end_tree(self.popen)
        _kill_orphans(self.token)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def close(self) -> None:
        """What it would do on its way out (torch's and Triton's exit hooks, the GPU context's
        release) concerns no one, yet waiting for it kept ``ktui run`` seconds past its verdicts.
        Its tree is killed now and reaped on a thread, which an exiting ``ktui`` does not wait for."""
        end_tree(self.popen, reap=False)
        _kill_orphans(self.token)
        shutil.rmtree(self.tmp, ignore_errors=True)
        threading.Thread(target=self.popen.wait, name="ktui-reap-worker", daemon=True).start()

    def beside(self, command: Command) -> subprocess.Popen:
        """A child of this process with the worker's GPU (its pinned ``CUDA_VISIBLE_DEVICES``), none
        of the worker's sandbox: no folders named to write or read, no temp folder of its own."""
        return subprocess.Popen(command.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", bufsize=1,
                                env=child_env({**self.command.env, **command.env}), start_new_session=True)

    def job_started(self) -> None:
        self.oom.job_started()

    def killed_by_oom(self) -> str:
        return self.oom.evidence() if self.popen.returncode == -signal.SIGKILL else ""


def _tree_env(token: str) -> dict[str, str]:
    """What the worker needs to know to keep its descendants in check (``ktui.protocol.processes``):
    a token its descendants inherit, and the parent to outlive no longer than."""
    return {processes.TOKEN_ENV: token, processes.PARENT_ENV: str(os.getpid())}


def _kill_orphans(token: str) -> None:
    """After a worker died, what it started was reparented out of its tree: find it by the token."""
    processes.kill_all(processes.tagged(token))
