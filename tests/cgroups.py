"""A memory cgroup of its own for a command a test starts, with a limit: what a container does.

Made below this process's own memory cgroup (v1 or v2) and removed afterwards; a machine where
that is not permitted skips the test, saying why.
"""

from __future__ import annotations

import contextlib
import shlex
import time
import uuid
from typing import Iterator

import pytest

from ktui.protocol.cgroups import MemoryCgroup, memory_cgroup


@contextlib.contextmanager
def limited(limit_bytes: int) -> Iterator[tuple[MemoryCgroup, list[str]]]:
    """The cgroup, and the argv prefix that runs a command inside it."""
    own = memory_cgroup()
    if own is None:
        pytest.skip("no memory cgroup to make one below")
    folder = own.folder / f"ktui-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
        (folder / ("memory.max" if own.version == 2 else "memory.limit_in_bytes")).write_text(str(limit_bytes))
    except OSError as exc:
        with contextlib.suppress(OSError):
            folder.rmdir()
        pytest.skip(f"cannot make a memory cgroup with a limit in {own.folder}: {exc.strerror}")
    try:
        prefix = ["sh", "-c", f"echo $$ > {shlex.quote(str(folder / 'cgroup.procs'))} && exec \"$@\"", "sh"]
        yield MemoryCgroup(own.version, (folder, *own.folders)), prefix
    finally:
        for _ in range(50):  # its last processes may still be exiting
            try:
                folder.rmdir()
                break
            except OSError:
                time.sleep(0.1)
