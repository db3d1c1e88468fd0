"""The one ssh connection of a session: OpenSSH's control master, keys only, retried with backoff.

Every command reaches the remote through ``ssh -o ControlMaster=auto -o ControlPath=<private
dir>/%C``, so a session opens one TCP connection however many runs, syncs and kills it makes.
``BatchMode=yes``: a missing key is an error, never a password prompt. Host-key checking is
whatever the user's ssh configuration says. Remote commands are argv lists, each word quoted
with ``shlex.quote`` for the remote shell: no file name is ever interpolated.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ktui.dispatch.remote.address import RemoteAddress

CONFIG_ENV = "KTUI_SSH_CONFIG"  # an ssh config file used instead of ~/.ssh/config (-F)
CONNECT_TIMEOUT_S = 10
# The remote's home, and whether it has rsync: exits 0 either way (``&&`` alone ended a remote with
# no rsync in "cannot reach").
PROBE = 'printf "%s\\n" "$HOME"; if command -v rsync >/dev/null; then echo rsync; fi'
BACKOFF_S = (0.5, 1.0, 2.0)  # the waits between connection attempts
COMMAND_TIMEOUT_S = 120.0
CONNECTION_ERROR = 255  # ssh's exit status when the connection itself failed


class LinkDown(RuntimeError):
    """The remote cannot be reached (after the retries): the message says what ssh said."""


class Link:
    def __init__(self, address: RemoteAddress, ssh_config: str | None = None):
        self.address = address
        self.ssh_config = ssh_config or os.environ.get(CONFIG_ENV) or None
        if self.ssh_config and not Path(self.ssh_config).is_file():
            raise ValueError(f"the ssh config {self.ssh_config} does not exist")
        if shutil.which("ssh") is None:
            raise ValueError("remote runs use the system's OpenSSH client, and `ssh` is not on PATH")
        self._control_dir = tempfile.mkdtemp(prefix="ktui-ssh-")  # 0700: the socket is ours alone
        self.state = "not connected"  # what the dashboard's status line shows
        self.home: str | None = None
        self.remote_rsync = False
        self.reconnects = 0  # connections opened: a new one may find a remote folder changed

    def options(self, master: bool = False) -> list[str]:
        """ssh's options (no destination): also what rsync's ``-e`` runs. Only ``connect`` starts
        the master (in the background, its output to a log file): a command that became a master
        itself would hold its caller's pipes open for as long as the master persists."""
        opts = ["ssh"]
        if self.ssh_config:
            opts += ["-F", self.ssh_config]
        opts += ["-o", "BatchMode=yes", "-o", f"ControlMaster={'auto' if master else 'no'}",
                 "-o", f"ControlPath={self._control_dir}/%C", "-o", "ControlPersist=60",
                 "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
                 "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if self.address.port:
            opts += ["-p", str(self.address.port)]
        return opts

    def argv(self, remote: list[str]) -> list[str]:
        """``ssh ... host -- 'word' 'word'``: the remote shell sees each word quoted."""
        return [*self.options(), "--", self.address.destination(), shlex.join(remote)]

    def shell_argv(self, script: str) -> list[str]:
        """``ssh ... host SCRIPT`` for a script whose variable parts were quoted by the caller."""
        return [*self.options(), "--", self.address.destination(), script]

    def run(self, remote: list[str], input: bytes | None = None, timeout: float = COMMAND_TIMEOUT_S,
            check: bool = True) -> subprocess.CompletedProcess:
        return self._run(self.argv(remote), input, timeout, check)

    def run_shell(self, script: str, timeout: float = COMMAND_TIMEOUT_S, check: bool = True,
                  input: bytes | None = None) -> subprocess.CompletedProcess:
        return self._run(self.shell_argv(script), input, timeout, check)

    def _run(self, argv: list[str], input: bytes | None, timeout: float, check: bool) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run(argv, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            self.state = "down"
            raise LinkDown(f"{self.address.display}: no answer within {timeout:g} s") from None
        if done.returncode == CONNECTION_ERROR and not self.master_alive():
            self.state = "down"
            raise LinkDown(f"{self.address.display}: the link dropped ({_said(done)})")
        if check and done.returncode != 0:
            raise RuntimeError(f"on {self.address.display}: {shlex.join(argv[-1:])} failed "
                               f"(exit code {done.returncode}): {_said(done)}")
        return done

    def master_alive(self) -> bool:
        try:
            done = subprocess.run([*self.options(), "-O", "check", "--", self.address.destination()],
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=CONNECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def connect(self) -> None:
        """Open the control connection if it is not open, retrying with backoff; LinkDown if it
        stays closed. Learns the remote's home folder and whether it has rsync."""
        if self.home is not None and self.master_alive():
            self.state = "up"
            return
        self.reconnects += 1
        last = ""
        for attempt, wait in enumerate((0.0, *BACKOFF_S)):
            if wait:
                self.state = f"retrying ({attempt}/{len(BACKOFF_S)})"
                time.sleep(wait)
            log = Path(self._control_dir) / "master.log"
            log.unlink(missing_ok=True)
            try:
                started = subprocess.run([*self.options(master=True), "-N", "-f", "-E", str(log), "--",
                                          self.address.destination()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, timeout=CONNECT_TIMEOUT_S * 3)
                if started.returncode != 0:
                    last = _last_line(log) or f"ssh exited with {started.returncode}"
                    continue
                done = subprocess.run(self.shell_argv(PROBE),
                                      stdin=subprocess.DEVNULL, capture_output=True, timeout=CONNECT_TIMEOUT_S * 3)
            except subprocess.TimeoutExpired:
                last = f"no answer within {CONNECT_TIMEOUT_S * 3} s"
                continue
            if done.returncode == 0:
                lines = done.stdout.decode(errors="replace").splitlines()
                self.home = lines[0] if lines else ""
                self.remote_rsync = "rsync" in lines[1:]
                self.state = "up"
                return
            last = _said(done)
        self.state = "down"
        raise LinkDown(f"cannot reach {self.address.display} over ssh after {1 + len(BACKOFF_S)} attempts: {last}")

    def close(self) -> None:
        """End the control master (it would otherwise linger for ControlPersist) and its folder."""
        try:
            subprocess.run([*self.options(), "-O", "exit", "--", self.address.destination()],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=CONNECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        shutil.rmtree(self._control_dir, ignore_errors=True)
        self.state = "closed"


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _said(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr or b"").decode(errors="replace").strip().splitlines()
    return text[-1] if text else f"exit code {done.returncode}"
