"""A real OpenSSH server on loopback for the remote-run tests: its own host key, client key,
``sshd_config`` and client ``ssh_config``, run as the current user on a free port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
PRIVSEP = Path("/run/sshd")


@dataclass
class Sshd:
    folder: Path
    port: int
    config: Path
    client_config: Path
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        with open(self.folder / "sshd.log", "ab") as log:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.config)], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 120  # a safety net: sshd listens within moments
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd refused to start: {(self.folder / 'sshd.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not listen within 10 s")

    def stop(self) -> None:
        """Kill the listener and every connection it serves (its session processes)."""
        if self.proc is None:
            return
        from ktui.protocol.processes import descendants, kill_all

        kill_all([*descendants(self.proc.pid), self.proc.pid])
        self.proc.wait(timeout=10)
        self.proc = None

    def session_processes(self) -> list[int]:
        from ktui.protocol.processes import descendants

        return [] if self.proc is None else descendants(self.proc.pid)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_sshd(folder: Path) -> Sshd:
    if not Path(SSHD).is_file() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("OpenSSH (sshd, ssh, ssh-keygen) is not installed: .ci/run installs openssh-server")
    if os.geteuid() == 0 and not PRIVSEP.is_dir():
        # sshd started by root insists on its (empty, root-owned) privilege separation folder,
        # which the package's service unit creates at boot: a container without one lacks it
        PRIVSEP.mkdir(mode=0o755, parents=True, exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / name)], check=True)
    shutil.copy(folder / "client_key.pub", folder / "authorized_keys")
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"AuthorizedKeysFile {folder / 'authorized_keys'}\nPidFile {folder / 'sshd.pid'}\n"
        "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\nPermitRootLogin yes\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
        # a test may point the remote at a tool or a fake GPU to calibrate; the remote's ktui keeps its
        # per-user files in the session's folder
        "AcceptEnv KTUI_NCU KTUI_COMPUTE_SANITIZER KTUI_USER_DIR KTUI_CALIBRATION_MEASURE FAKE_GPU_*\n")
    client = folder / "ssh_config"
    client.write_text(
        f"Host *\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {folder / 'client_key'}\n  IdentitiesOnly yes\n"
        "  SendEnv KTUI_USER_DIR KTUI_CALIBRATION_MEASURE FAKE_GPU_*\n"
        f"  StrictHostKeyChecking no\n  UserKnownHostsFile {folder / 'known_hosts'}\n  LogLevel ERROR\n")
    return Sshd(folder, port, config, client)
