"""The transport of a worker on a remote host: ``ssh host agent launch``.

Its stdin, stdout and stderr are the remote worker's, so the worker protocol runs over it as over
a local process. What differs: signals and kills go to the remote (through the control
connection), and the exit status is the remote worker's, as the agent reports it on stderr
(``agent.PID_MARK``, ``agent.EXIT_MARK``: lines of the transport's own, never the worker's output).
A process beside the worker (the calibration's measuring process) is ``ssh host agent beside``,
started there in the same folder with the same Python, and ended there when its ssh session ends.
"""

from __future__ import annotations

import shlex
import subprocess
import uuid

from ktui.dispatch.proc import end_tree
from ktui.dispatch.remote import agent
from ktui.dispatch.remote.link import Link, LinkDown
from ktui.dispatch.transport import Command, Transport
from ktui.protocol import processes

KILL_TIMEOUT_S = 15.0


class SshProcess(Transport):
    def __init__(self, command: Command, link: Link, base: str, python: str):
        """``command``'s worker, started by the agent in ``base``'s workspace copy with ``python``."""
        self.link = link
        self.base, self.python = base, python
        self.token = uuid.uuid4().hex
        self.remote_pid: int | None = None
        self.remote_exit: int | None = None
        pkg = f"PYTHONPATH={base}/pkg"
        launch = ["env", pkg, "PYTHONUNBUFFERED=1", f"{processes.TOKEN_ENV}={self.token}",
                  python, "-m", "ktui.dispatch.remote.agent", "launch", *command.args]
        self.kill_command = ["env", pkg, python, "-m", "ktui.dispatch.remote.agent", "kill"]
        self.signal_command = ["env", pkg, python, "-m", "ktui.dispatch.remote.agent", "signal"]
        script = f"cd {shlex.quote(base + '/ws')} && exec {shlex.join(launch)}"
        self.popen = subprocess.Popen(link.shell_argv(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
                                      bufsize=1, start_new_session=True)
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        self.stdin, self.stdout, self.stderr = self.popen.stdin, self.popen.stdout, self.popen.stderr

    def aside(self, line: str) -> bool:
        for mark in (agent.PID_MARK, agent.EXIT_MARK):
            if line.startswith(mark):
                value = line[len(mark):].rstrip("\n").rstrip(agent.MARK_END)
                if value.lstrip("-").isdigit():
                    if mark == agent.PID_MARK:
                        self.remote_pid = int(value)
                    else:
                        self.remote_exit = int(value)
                return True
        return False

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self) -> None:
        self.popen.wait()

    @property
    def returncode(self) -> int | None:
        """The remote worker's, once the agent said it (read from stderr); else the ssh client's."""
        return self.remote_exit if self.remote_exit is not None else self.popen.returncode

    def signal(self, signum: int) -> None:
        """Signal the remote worker (a stack request, ``ktui.dispatch.stacks``) on its own host."""
        if self.remote_pid is not None:
            try:
                # by name, resolved there: a real-time signal's number is the remote C library's
                self.link.run([*self.signal_command, processes.signal_name(signum), str(self.remote_pid)],
                              timeout=KILL_TIMEOUT_S, check=False)
            except LinkDown:
                pass

    def kill(self) -> None:
        """Kill the remote worker's group (and what it orphaned) through the control connection,
        then the local ssh client; with the link down, the agent ends the worker by itself."""
        if self.remote_pid is not None and self.link.master_alive():
            try:
                self.link.run([*self.kill_command, str(self.remote_pid), self.token], timeout=KILL_TIMEOUT_S,
                              check=False)
            except LinkDown:
                pass
        end_tree(self.popen)

    def close(self) -> None:
        """At once, as a local worker closes (its verdicts are out): killed through the control
        connection, which also leaves nothing behind there."""
        self.kill()

    def beside(self, command: Command) -> subprocess.Popen:
        """``command`` on the remote, in the workspace's copy there, through the agent, which ends it
        as soon as this ssh session is gone (ending this process ends it there)."""
        launch = ["env", f"PYTHONPATH={self.base}/pkg", "PYTHONUNBUFFERED=1", *(f"{k}={v}" for k, v in command.env.items()),
                  self.python, "-m", "ktui.dispatch.remote.agent", "beside", command.module, *command.args]
        script = f"cd {shlex.quote(self.base + '/ws')} && exec {shlex.join(launch)}"
        return subprocess.Popen(self.link.shell_argv(script), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace", bufsize=1,
                                start_new_session=True)

    def job_started(self) -> None:
        """Nothing to note: the remote's kernel log and cgroup are not readable from here."""

    def killed_by_oom(self) -> str:
        return ""
