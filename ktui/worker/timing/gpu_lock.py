"""One timed section at a time on each GPU, across every ktui process of this host.

Two processes timing on one GPU at once each time the other's kernels too: a correct kernel's
benchmark doubles, and the timer-escape check (``ktui.worker.integrity.timer_escape``) takes the
other process's work for the kernel's hidden work and calls it ``suspicious``. A workspace's owner
(``ktui.dispatch``) keeps one workspace's runs apart; this lock keeps apart the timed sections of
different workspaces (two checkouts, a test suite in several processes, two users).

The lock is an advisory ``flock`` on one file per GPU, named by the GPU's UUID, in
``/dev/shm/ktui-gpu-locks`` — beneath ``/dev``, which a confined worker may write
(``ktui.worker.confine``), and shared by every process of the host that shares its ``/dev/shm``.
A section waits at most ``WAIT_S`` for it (well inside the benchmark rung's time limit), then is
timed anyway and says so. Processes that are not ktui are not held back by it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ktui.worker.timing.device_id import pci_bus_id_of, uuid_of

WAIT_S = 60.0
POLL_S = 0.005
SHARED_MEMORY = Path("/dev/shm")


def lock_dir() -> Path:
    """Where the lock files live: ``/dev/shm`` where the host has it, else the temp folder."""
    base = SHARED_MEMORY if SHARED_MEMORY.is_dir() else Path(tempfile.gettempdir())
    return base / "ktui-gpu-locks"


@dataclass
class Turn:
    """How a timed section got (or did not get) the GPU to itself; ``release`` ends it."""

    waited_s: float = 0.0
    held: bool = False  # the section had the GPU to itself (it stays true once released)
    note: str = ""  # why the section was timed without the lock, when it was
    _fd: int | None = None  # the locked file, until ``release``

    def figures(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.waited_s >= 0.01:
            out["gpu_wait_s"] = round(self.waited_s, 3)
        if not self.held:
            out["gpu_lock"] = self.note
        return out

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._fd = None


_open: dict[Path, int] = {}  # one descriptor per lock file for the process's life


def _descriptor(path: Path) -> int:
    """The lock file's descriptor. The folder is shared by every user of the host, so nothing in it
    is trusted: a link is never followed, and only a file or folder made here has its mode set."""
    if path not in _open:
        _folder(path.parent)
        flags = os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o666)
            os.fchmod(fd, 0o666)  # made here: the umask would keep other users from locking it
        except FileExistsError:
            try:
                fd = os.open(path, os.O_RDWR | flags)
            except PermissionError:
                fd = os.open(path, os.O_RDONLY | flags)  # another user's file: flock needs only a read
        _open[path] = fd
    return _open[path]


def _folder(folder: Path) -> None:
    try:
        folder.mkdir(mode=0o1777)
        os.chmod(folder, 0o1777)  # every user's ktui shares it; the sticky bit keeps their files apart
    except FileExistsError:
        pass
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise OSError(errno.ENOTDIR, "a link or a file stands where the lock folder should be")


def _file_name(device_key: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)
    return f"{safe or 'gpu'}.lock"


def take(device_key: str, wait_s: float = WAIT_S, directory: Path | None = None) -> Turn:
    """Wait at most ``wait_s`` for the GPU named ``device_key``; the turn says whether it was had."""
    turn = Turn()
    path = (directory or lock_dir()) / _file_name(device_key)
    try:
        fd = _descriptor(path)
    except OSError as exc:
        turn.note = f"timed without the cross-process GPU lock: {path} could not be opened ({exc.strerror or exc})"
        return turn
    started = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            turn.held, turn._fd = True, fd
            break
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                turn.note = f"timed without the cross-process GPU lock: flock failed ({exc.strerror or exc})"
                break
        if time.monotonic() - started >= wait_s:
            turn.note = (f"timed while another ktui process was timing on this GPU: it kept the GPU's lock "
                         f"for {wait_s:.0f} s, so this measurement may include its work")
            break
        time.sleep(POLL_S)
    turn.waited_s = time.monotonic() - started
    return turn


@contextmanager
def alone_on(device_key: str, wait_s: float = WAIT_S, directory: Path | None = None) -> Iterator[Turn]:
    """Hold the GPU named ``device_key`` for the ``with`` block (``take``, then ``release``)."""
    turn = take(device_key, wait_s, directory)
    try:
        yield turn
    finally:
        turn.release()


def device_key(index: int | None = None) -> str:
    """The current CUDA device as every process of the host names it (``device_id``)."""
    import torch

    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    return uuid_of(props) or pci_bus_id_of(props) or f"{props.name}-{index}"
