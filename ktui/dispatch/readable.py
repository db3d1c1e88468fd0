"""What a worker may read, seen from the parent: the workspaces of its runs, and when a warm worker's
rules are out of date.

A confined process reads a workspace as its rules were made when it started
(``ktui.worker.confine.rules``): a rule holds a file or folder as it was then, so a folder or a
file made at the workspace's root afterwards, or one replaced by a save (an editor's atomic
rename), is out of its reach. The parent names the folders and files a job needs read; a worker
that does not yet read them, or whose rules were made before such a change, is replaced before the
job runs, as one that may not yet write its run folder is (``WorkerRunner``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ktui.protocol.job import Job
from ktui.protocol.statedir import calibration_file, readable_entries
from ktui.workspace.shipped import outside_modules


def reads_of(job: Job) -> list[str]:
    """The job's workspace root, and its kernel, reference and modules where they lie outside it."""
    root = job.root
    named = [job.kernel_path, job.reference_path, *job.reference_modules.values(),
             *outside_modules(root, [job.problem])]
    return list(dict.fromkeys([root, *(p for p in named if p and not _inside(p, root))]))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def state(paths: Iterable[str]) -> tuple:
    """What the rules made for ``paths`` depend on: each path's inode, and for a folder each
    readable entry's name and inode, and its calibration file's (``ktui calibrate`` replaces it).
    Equal states, equal rules."""
    out = []
    for path in paths:
        folder = os.path.isdir(path)
        entries = [*readable_entries(Path(path)), calibration_file(Path(path))] if folder else []
        out.append((path, _inode(Path(path)), tuple((e.name, _inode(e)) for e in entries)))
    return tuple(out)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


class ReadRules:
    """The paths a process's rules let it read, and the state they were made from."""

    def __init__(self, paths: Iterable[str] = ()):
        self.paths: tuple[str, ...] = tuple(paths)
        self._state: tuple | None = None

    def admit(self, job: Job) -> bool:
        """Add what ``job`` needs read; True when the process must be replaced to read it: it
        needed more, or what it reads changed since the last job (a new entry, a replaced file)."""
        missing = [p for p in reads_of(job) if p not in self.paths]
        self.paths = (*self.paths, *missing)
        now = state(self.paths)
        changed = self._state is not None and now != self._state
        self._state = now
        return bool(missing) or changed
