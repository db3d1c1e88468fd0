"""The parent's side of a worker on a remote host: the same ``WorkerProcess``, through ssh.

The local process is ``ssh host agent launch``: its stdin, stdout and stderr are the remote
worker's, so ``LocalRunner``'s reading of the stream, its timeouts and its crash reports apply
as they are. What differs: signals and kills go to the remote (through the control
connection), and the exit status is the remote worker's, as the agent reports it.
"""

from __future__ import annotations

import collections
import queue
import shlex
import signal
import subprocess
import threading
import uuid
from typing import Any

from ktui.dispatch.oom import OomWatch
from ktui.dispatch.proc import end_tree
from ktui.dispatch.remote import agent
from ktui.dispatch.remote.link import Link, LinkDown
from ktui.dispatch.runner import STDERR_TAIL, WorkerConfig, WorkerProcess
from ktui.protocol import processes

KILL_TIMEOUT_S = 15.0


class RemoteProc:
    """The ssh client, whose ``returncode`` is the remote worker's once the agent said it."""

    def __init__(self, popen: subprocess.Popen, worker: RemoteWorker):
        self.popen = popen
        self._worker = worker

    def __getattr__(self, name: str) -> Any:
        return getattr(self.popen, name)

    @property
    def returncode(self) -> int | None:
        if self.popen.returncode is not None:
            self._worker._stderr_reader.join(timeout=2.0)  # the exit mark comes on stderr
        if self._worker.remote_exit is not None:
            return self._worker.remote_exit
        return self.popen.returncode


class RemoteWorker(WorkerProcess):
    def __init__(self, config: WorkerConfig, link: Link, base: str, python: str):
        self.config = config
        self.link = link
        self.messages: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.lines_seen = 0
        self.token = uuid.uuid4().hex
        self.remote_pid: int | None = None
        self.remote_exit: int | None = None
        self.info: dict[str, Any] = {}
        self.oom = OomWatch.elsewhere()
        command = ["env", f"PYTHONPATH={base}/pkg", "PYTHONUNBUFFERED=1", f"{processes.TOKEN_ENV}={self.token}",
                   python, "-m", "ktui.dispatch.remote.agent", "launch", *config.argv()[3:]]
        self.kill_command = ["env", f"PYTHONPATH={base}/pkg", python, "-m", "ktui.dispatch.remote.agent", "kill"]
        script = f"cd {shlex.quote(base + '/ws')} && exec {shlex.join(command)}"
        popen = subprocess.Popen(link.shell_argv(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", bufsize=1,
                                 start_new_session=True)
        self.proc = RemoteProc(popen, self)  # type: ignore[assignment]
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _output(self, line: str) -> None:
        for mark in (agent.PID_MARK, agent.EXIT_MARK):
            if line.startswith(mark):
                value = line[len(mark):].rstrip("\n").rstrip(agent.MARK_END)
                if value.lstrip("-").isdigit():
                    if mark == agent.PID_MARK:
                        self.remote_pid = int(value)
                    else:
                        self.remote_exit = int(value)
                return
        super()._output(line)

    def signal_stack(self, signum: signal.Signals = processes.STACK_SIGNAL) -> None:
        """Ask the remote worker for its Python stacks (``ktui.dispatch.stacks``)."""
        if self.remote_pid is not None:
            try:
                self.link.run(["kill", f"-{signal.Signals(signum).name.removeprefix('SIG')}", str(self.remote_pid)],
                              timeout=KILL_TIMEOUT_S, check=False)
            except LinkDown:
                pass

    def close(self) -> None:
        """At once, as a local worker closes (its verdicts are out): the remote worker is killed
        through the control connection, which also leaves nothing behind there."""
        self.kill()

    def kill(self) -> None:
        """Kill the remote worker's group (and what it orphaned) through the control connection,
        then the local ssh client; with the link down, the agent ends the worker by itself."""
        if self.remote_pid is not None and self.popen_alive_or_link():
            try:
                self.link.run([*self.kill_command, str(self.remote_pid), self.token], timeout=KILL_TIMEOUT_S, check=False)
            except LinkDown:
                pass
        end_tree(self.proc.popen)

    def popen_alive_or_link(self) -> bool:
        return self.link.master_alive()
