"""Copying to and from the remote: the workspace's files, ktui itself, a run's folder back.

rsync over the session's ssh connection when both ends have it (incremental by rsync's own
checks), else tar over ssh (incremental within a session: only files whose size or mtime changed
since the last send). File names travel as NUL-separated lists or tar members, never through a
shell: rsync runs with ``--protect-args``, tar is written and read by Python's ``tarfile``.
"""

from __future__ import annotations

import io
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

from ktui.dispatch.remote.link import Link, LinkDown
from ktui.workspace.shipped import workspace_files

SYNC_TIMEOUT_S = 600.0


class Syncer:
    def __init__(self, link: Link, mode: str = "auto"):
        if mode not in ("auto", "rsync", "tar"):
            raise ValueError(f"the sync mode is auto, rsync or tar, got {mode!r}")
        self.link = link
        self.mode = mode
        self._sent: dict[tuple[str, str], tuple[int, int]] = {}  # (remote dir, name) → (size, mtime_ns), tar only

    def uses_rsync(self) -> bool:
        if self.mode == "tar":
            return False
        both = shutil.which("rsync") is not None and self.link.remote_rsync
        if self.mode == "rsync" and not both:
            raise ValueError(f"rsync is missing {'here' if shutil.which('rsync') is None else 'on ' + self.link.address.display}")
        return both

    def send(self, local: Path, names: list[str], remote: str) -> None:
        """``local/NAME`` → ``remote/NAME`` for each name (the workspace: the agent's ``prepare``
        removes the remote files that are no longer here)."""
        if self.uses_rsync():
            self._rsync(["rsync", "-a", "--protect-args", "--from0", "--files-from=-", "-e", shlex.join(self.link.options()),
                         "--", f"{local}/", f"{self.link.address.destination()}:{remote}/"],
                        "\0".join(names).encode("utf-8", "surrogateescape"))
            return
        changed = [(name, _stamp(local / name)) for name in names
                   if self._sent.get((remote, name)) != _stamp(local / name)]
        if changed:
            self._tar(local, changed, remote)

    def mirror(self, local: Path, remote: str) -> None:
        """``remote`` becomes a copy of the folder ``local`` (ktui's own package): nothing stale stays."""
        if self.uses_rsync():
            self._rsync(["rsync", "-a", "--protect-args", "--delete", "--exclude=__pycache__", "-e",
                         shlex.join(self.link.options()), "--", f"{local}/", f"{self.link.address.destination()}:{remote}/"],
                        None)
            return
        names = workspace_files(local)
        stamps = [(name, _stamp(local / name)) for name in names]
        if all(self._sent.get((remote, name)) == stamp for name, stamp in stamps) and len(stamps) == sum(
                1 for key in self._sent if key[0] == remote):
            return
        self.link.run(["rm", "-rf", "--", remote])
        for key in [key for key in self._sent if key[0] == remote]:
            del self._sent[key]
        self._tar(local, stamps, remote)

    def _tar(self, local: Path, files: list[tuple[str, tuple[int, int]]], remote: str) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            for name, _ in files:
                tar.add(local / name, arcname=name, recursive=False)
        self._untar(buffer.getvalue(), remote)
        for name, stamp in files:
            self._sent[(remote, name)] = stamp

    def _untar(self, data: bytes, remote: str) -> None:
        script = f"mkdir -p -- {shlex.quote(remote)} && tar -xf - -C {shlex.quote(remote)}"
        self.link.run_shell(script, timeout=SYNC_TIMEOUT_S, input=data)

    def fetch(self, remote: str, local: Path) -> None:
        """The remote folder's files into ``local`` (a run's dumps, reports and logs)."""
        local.mkdir(parents=True, exist_ok=True)
        if self.uses_rsync():
            self._rsync(["rsync", "-a", "--protect-args", "-e", shlex.join(self.link.options()), "--",
                         f"{self.link.address.destination()}:{remote}/", f"{local}/"], None)
            return
        done = self.link.run_shell(f"tar -cf - -C {shlex.quote(remote)} .", timeout=SYNC_TIMEOUT_S)
        with tarfile.open(fileobj=io.BytesIO(done.stdout), mode="r") as tar:
            tar.extractall(local, filter="data")

    def _rsync(self, argv: list[str], data: bytes | None) -> None:
        try:
            done = subprocess.run(argv, input=data, stdin=None if data is not None else subprocess.DEVNULL,
                                  capture_output=True, timeout=SYNC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"rsync to {self.link.address.display} took more than {SYNC_TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            if not self.link.master_alive():
                raise LinkDown(f"{self.link.address.display}: the link dropped during the sync")
            raise RuntimeError(f"rsync with {self.link.address.display} failed: {said[-1] if said else done.returncode}")


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns
