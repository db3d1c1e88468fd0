"""The memory cgroup a process lives in (v1 or v2): how much more it may take, and how many of its
processes the out-of-memory killer ended.

A container or a systemd slice caps memory below what ``/proc/meminfo`` calls available: a check
that reads only the host's figure says a problem fits, and the kernel then SIGKILLs the worker.
The limit that binds is the tightest of the cgroup's and its ancestors' (each ``limit − in use``,
the page cache it could drop not counted as in use). Read from ``/proc/<pid>/cgroup`` and
``/proc/<pid>/mountinfo``; ``proc`` is a parameter so the reading can be shown on any tree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

V1_UNLIMITED = 1 << 62  # cgroup v1 writes "no limit" as a page-rounded LONG_MAX


@dataclass(frozen=True)
class MemoryCgroup:
    version: int  # 1 or 2
    folders: tuple[Path, ...]  # the cgroup's folder, then each ancestor's up to the hierarchy's mount

    @property
    def folder(self) -> Path:
        return self.folders[0]

    def headroom(self) -> int | None:
        """Bytes its processes may still take before a limit of it or of an ancestor binds; None
        when none is set (or none can be read)."""
        rooms = [room for folder in self.folders if (room := self._room(folder)) is not None]
        return max(0, min(rooms)) if rooms else None

    def limit(self) -> int | None:
        """The tightest limit set on it or an ancestor, in bytes; None when none is set."""
        limits = [limit for folder in self.folders if (limit := self._limit(folder)) is not None]
        return min(limits) if limits else None

    def oom_kills(self) -> int | None:
        """How many processes of this cgroup (and below) the OOM killer has ended, by the kernel's
        counter (``oom_kill`` of ``memory.events``, v1's ``memory.oom_control``); None where the
        kernel keeps no such counter."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _keyed(self.folder / name).get("oom_kill")

    def _limit(self, folder: Path) -> int | None:
        text = _read(folder / ("memory.max" if self.version == 2 else "memory.limit_in_bytes"))
        if text is None or text == "max" or not text.isdigit():
            return None
        limit = int(text)
        return None if self.version == 1 and limit >= V1_UNLIMITED else limit

    def _room(self, folder: Path) -> int | None:
        limit = self._limit(folder)
        used = _read(folder / ("memory.current" if self.version == 2 else "memory.usage_in_bytes"))
        if limit is None or used is None or not used.isdigit():
            return None
        stat = _keyed(folder / "memory.stat")
        cache = stat.get("inactive_file") if self.version == 2 else stat.get("total_inactive_file", stat.get("inactive_file"))
        return limit - (int(used) - (cache or 0))


def memory_cgroup(pid: int | str = "self", proc: Path = Path("/proc")) -> MemoryCgroup | None:
    """The memory cgroup of process ``pid``; None where there is none to read (not Linux, no
    memory controller, a folder this process cannot see)."""
    lines = _read(proc / str(pid) / "cgroup")
    mounts = _read(proc / str(pid) / "mountinfo")
    if lines is None or mounts is None:
        return None
    v1 = v2 = None
    for line in lines.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "memory" in controllers.split(","):
            v1 = path
        elif number == "0" and controllers == "":
            v2 = path
    for version, path in ((1, v1), (2, v2)):
        if path is None:
            continue
        found = _mounted(mounts, version, path)
        if found is not None:
            mount, folder = found
            if (folder / ("memory.max" if version == 2 else "memory.limit_in_bytes")).exists() or folder == mount:
                return MemoryCgroup(version, tuple(_up_to(folder, mount)))
    return None


def _mounted(mountinfo: str, version: int, path: str) -> tuple[Path, Path] | None:
    """Where the hierarchy holding ``path`` is mounted, and the cgroup's folder there."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        root, mount_point, fstype = fields[3], fields[4], fields[dash + 1]
        options = fields[dash + 3].split(",") if len(fields) > dash + 3 else []
        if (version == 2 and fstype != "cgroup2") or (version == 1 and (fstype != "cgroup" or "memory" not in options)):
            continue
        inner = path if root == "/" else (path[len(root):] if path.startswith(root) else None)
        if inner is None:
            continue
        mount = Path(_unescape(mount_point))
        return mount, mount / inner.lstrip("/")
    return None


def _up_to(folder: Path, mount: Path) -> list[Path]:
    folders = [folder]
    while folders[-1] != mount and mount in folders[-1].parents:
        folders.append(folders[-1].parent)
    return folders


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _keyed(path: Path) -> dict[str, int]:
    """A ``key value`` file (memory.stat, memory.events, memory.oom_control) as numbers."""
    found: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            found[key] = int(value)
    return found


def _unescape(text: str) -> str:
    """mountinfo writes a space as ``\\040`` (and tab, newline, backslash likewise)."""
    return os.fsdecode(text.encode().decode("unicode_escape").encode("latin-1"))
