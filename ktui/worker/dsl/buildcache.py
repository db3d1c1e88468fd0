"""ktui's own cache of compiler outputs, keyed on everything that went in: one folder per compiler
among ktui's compiler caches (``statedir.compiler_caches``), shared by every workspace and process
of this user, written only by ktui's confined processes.

An entry is a folder of files (``cubin``, ``ptx``…) named by the SHA-256 of the build's inputs,
published whole by one rename, so a reader sees all of it or none of it; its ``meta.json`` holds
each file's size and hash, and an entry that does not match them is a miss. A build in progress
holds the key's lock (``building``): another process that needs the same key waits for it and
then reads the entry, instead of running the same compiler at the same time. The oldest entries
(by last use) go once there are more than ``MAX_ENTRIES``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

MAX_ENTRIES = 2000  # about 100 MB of TileLang CUBINs and PTX: a day of saves of a few kernels
LOCK_WAIT_S = 300.0  # past this a build holding the lock is presumed stuck, and this process builds too
_POLL_S = 0.01


def key_of(**inputs: object) -> str:
    """The key of a build: the SHA-256 of its inputs (JSON-serialisable values), in a stable order."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()


class BuildCache:
    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def entry(self, key: str) -> Path:
        return self.folder / key[:2] / key

    def get(self, key: str) -> dict[str, bytes] | None:
        """The entry's files, or None (missing, partly removed, or not what was written)."""
        folder = self.entry(key)
        try:
            meta = json.loads((folder / "meta.json").read_text())
            files = {name: (folder / name).read_bytes() for name in meta["files"]}
        except (OSError, ValueError, KeyError, TypeError):
            return None
        for name, data in files.items():
            if hashlib.sha256(data).hexdigest() != meta["files"][name]:
                return None
        with contextlib.suppress(OSError):
            os.utime(folder)  # used now: the last to be pruned
        return files

    def put(self, key: str, files: dict[str, bytes]) -> None:
        """Publish ``files`` under ``key``; an entry already there (another process's) is kept, and a
        folder this process may not write keeps nothing (the build itself is not affected)."""
        folder = self.entry(key)
        if folder.exists():
            return
        staging = self.folder / ".staging" / f"{key}.{os.getpid()}.{uuid.uuid4().hex}"
        try:
            staging.mkdir(parents=True)
            for name, data in files.items():
                (staging / name).write_bytes(data)
            meta = {"files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}}
            (staging / "meta.json").write_text(json.dumps(meta))
            folder.parent.mkdir(parents=True, exist_ok=True)
            staging.rename(folder)  # fails where another process published it first: theirs stays
        except OSError:
            return
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.prune()

    @contextlib.contextmanager
    def building(self, key: str) -> Iterator[dict[str, bytes] | None]:
        """Hold ``key``'s lock while this process builds it; yields the entry when another process
        published it while this one waited (then there is nothing to build)."""
        try:
            (self.folder / ".locks").mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / ".locks" / key, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a folder this process may not write: it builds without waiting for anyone
            yield None
            return
        try:
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(_POLL_S)
            yield self.get(key)
        finally:
            os.close(fd)  # releases the lock

    def prune(self, keep: int = MAX_ENTRIES) -> None:
        """Remove the least recently used entries past ``keep`` (a reader of one sees a miss)."""
        try:
            entries = [e for shard in self.folder.iterdir() if len(shard.name) == 2 for e in shard.iterdir()]
        except OSError:
            return
        if len(entries) <= keep:
            return
        entries.sort(key=_last_use)
        for entry in entries[: len(entries) - keep]:
            shutil.rmtree(entry, ignore_errors=True)
            with contextlib.suppress(OSError):
                (self.folder / ".locks" / entry.name).unlink()


def _last_use(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0
