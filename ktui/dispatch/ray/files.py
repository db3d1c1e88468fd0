"""A Ray run's folder: written in a scratch folder on the actor's node, shipped back with its events.

On a cluster an actor runs on another machine, where the workspace's ``.ktui/runs/...`` is not
the driver's. So the actor never writes into the path the driver named: its worker writes into a
scratch folder of its own node (under the node's temporary directory), the actor ships each file
it finds there as it appears (a dump, ``resources.json``, a profile), together with the next
event, and the driver writes it into the run folder where a local run puts it, before that event
reaches anyone. The events' paths name the driver's run folder, never the scratch one.

Always shipped, whichever node ran the job: one path for every run (the single-node tests cover
the multi-node code), no guess about whether a path the actor sees is the driver's (two Ray nodes
may share a hostname, containers share paths that are not the same disk), and cheap — a run's
files are kilobytes to a few megabytes, which on the driver's own node travel through shared
memory. A file over ``MAX_FILE_BYTES``, or past ``MAX_RUN_BYTES`` in all, stays behind; the run's
message and its summary (``not_shipped``) say which and why.

The other way, the workspace the job reads comes with the job (``ray.ship``): ``WorkspaceCopies``
writes each version once into the actor's scratch folder, and the scratch run's Job names the
copy; its events name the driver's files again.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from ktui.protocol.job import Job
from ktui.workspace.relocation import Relocation
from ktui.workspace.shipped import job_relocation, moved_job

MAX_FILE_BYTES = 32 * 2**20
MAX_RUN_BYTES = 128 * 2**20
SOURCE = "source.py"  # written by the driver when it prepared the run: never shipped back
OUTSIDE = ".ktui-outside"  # in a workspace copy: the GPU MODE modules kept outside the workspace
WORKSPACES = "workspaces"  # in an actor's scratch folder: one copy per workspace version
KEEP_COPIES = 4  # workspace versions an actor keeps written


def scratch_root() -> Path:
    """This node's scratch folder for one actor: node-private, removed when the actor closes."""
    return Path(tempfile.mkdtemp(prefix="ktui-ray-")).resolve()  # as the worker resolves the workspace's paths


class ScratchRun:
    """One job's run folder on the actor's node: the Job pointed at it, the files it gained."""

    def __init__(self, root: Path, job: Job, max_file_bytes: int = MAX_FILE_BYTES,
                 max_run_bytes: int = MAX_RUN_BYTES, copy: Path | None = None, outside: dict[str, str] | None = None):
        """``copy``: the folder holding the job's workspace on this node (``WorkspaceCopies``), with
        ``outside`` (original path → name in the copy) for the files kept outside the workspace."""
        self.local_run = job.run_dir
        self.path = Path(root) / job.run_id
        self.path.mkdir(parents=True)
        (self.path / SOURCE).write_text(job.source, encoding="utf-8")  # as the driver's run folder has it
        data = job.to_json()
        if copy is None:  # the workspace where the driver has it (a test's single node)
            there = Relocation({job.run_dir: str(self.path)})
        else:
            placed = {original: str(Path(copy) / name) for original, name in (outside or {}).items()}
            there = job_relocation(data, str(copy), str(self.path), placed)
        self.job = Job.from_json(moved_job(data, there, "a Ray run"))
        self.home = there.back  # this node's paths as the driver's
        self.max_file_bytes = max_file_bytes
        self.max_run_bytes = max_run_bytes
        self.shipped_bytes = 0
        self.not_shipped: dict[str, str] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._shipped: dict[str, int] = {}  # name → bytes the driver holds of it

    def new_files(self) -> dict[str, bytes | None]:
        """The files written or changed since the last call, by path relative to the run folder;
        ``None`` withdraws a file shipped while it was still being written that has since grown
        past the limits (the driver deletes its copy)."""
        found: dict[str, bytes | None] = {}
        for path in sorted(self.path.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            name = path.relative_to(self.path).as_posix()
            stat = path.stat()
            key = (stat.st_size, stat.st_mtime_ns)
            if name == SOURCE or self._seen.get(name) == key or name in self.not_shipped:
                continue
            self._seen[name] = key
            refused = self._refusal(name, stat.st_size)
            if refused:
                self.not_shipped[name] = refused
                if name in self._shipped:
                    found[name] = None
                    self.shipped_bytes -= self._shipped.pop(name)
                continue
            data = found[name] = path.read_bytes()
            self.shipped_bytes += len(data) - self._shipped.get(name, 0)
            self._shipped[name] = len(data)
        return found

    def _refusal(self, name: str, size: int) -> str:
        if size > self.max_file_bytes:
            return (f"{name} ({mib(size)}) was not shipped back from the Ray node that ran it: "
                    f"a file may be at most {mib(self.max_file_bytes)}")
        if self.shipped_bytes - self._shipped.get(name, 0) + size > self.max_run_bytes:
            return (f"{name} ({mib(size)}) was not shipped back from the Ray node that ran it: "
                    f"the run's files may be at most {mib(self.max_run_bytes)} in all")
        return ""

    def back(self, event: dict[str, Any], where: str = "") -> dict[str, Any]:
        """An event of the scratch run as the driver's: its paths name the driver's run folder;
        a ``run_finished`` says which files stayed behind on ``where``."""
        event = self.home.json(event)
        if event.get("type") == "run_finished" and self.not_shipped:
            reasons = [f"{reason} ({where})" if where else reason for reason in self.not_shipped.values()]
            event["message"] = "\n".join(filter(None, [event.get("message", ""), *reasons]))
            event["summary"] = {**event.get("summary", {}), "not_shipped": reasons}
        return event

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class WorkspaceCopies:
    """The workspace versions an actor has written into its scratch folder, one folder per
    content hash (``workspaces/<hash>/``): written once, reused by the later jobs of that version;
    the least recently used beyond ``keep`` are removed."""

    def __init__(self, scratch: Path, keep: int = KEEP_COPIES):
        self.base = Path(scratch) / WORKSPACES
        self.base.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self._used: OrderedDict[str, None] = OrderedDict()

    def get(self, digest: str, fetch: Callable[[], dict[str, bytes]]) -> Path:
        """The folder of version ``digest``, written from ``fetch()`` (the shipped files) if this
        actor has not written it yet."""
        if not digest.isalnum():
            raise ValueError(f"a workspace version is named by its hex hash, got {digest!r}")
        folder = self.base / digest
        if not folder.is_dir():
            self._write(folder, fetch())
        self._used[digest] = None
        self._used.move_to_end(digest)
        while len(self._used) > self.keep:
            old, _ = self._used.popitem(last=False)
            shutil.rmtree(self.base / old, ignore_errors=True)
        return folder

    def _write(self, folder: Path, files: dict[str, bytes]) -> None:
        """All of it or nothing: written beside ``folder``, then renamed into place."""
        partial = Path(tempfile.mkdtemp(dir=self.base, prefix=f".{folder.name}."))
        try:
            write_shipped(str(partial), files, atomic=False)
            os.rename(partial, folder)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise


def write_shipped(run_dir: str, files: dict[str, bytes | None], atomic: bool = True) -> None:
    """Files shipped from an actor, into the driver's run folder (each atomically: a reader never
    sees half a file; ``atomic=False`` for a folder no one reads yet); ``None`` deletes a file
    withdrawn by the actor. A name that would leave the folder is refused."""
    base = Path(run_dir).resolve()
    for name, data in files.items():
        target = (base / name).resolve()
        if base not in target.parents:
            raise ValueError(f"a shipped file named {name!r} would land outside the run folder {base}")
        if data is None:
            target.unlink(missing_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if not atomic:
            target.write_bytes(data)
            continue
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size} B"
