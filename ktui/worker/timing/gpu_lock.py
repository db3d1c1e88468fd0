"""One timed section at a time on each GPU, and no other ktui work beside it, across every ktui
process of this host.

Two processes timing on one GPU at once each time the other's kernels too: a correct kernel's
benchmark doubles, and the timer-escape check (``ktui.worker.integrity.timer_escape``) takes the
other process's work for the kernel's hidden work and calls it ``suspicious``. The same holds for a
correctness check or a compile that another process runs while one times. A workspace's owner
(``ktui.dispatch``) keeps one workspace's runs apart; this lock keeps apart different workspaces
(two checkouts, a test suite in several processes, two users).

It is a readers-writer lock of advisory ``flock`` s on files named by the GPU's UUID in
``/dev/shm/ktui-gpu-locks`` — the one folder of ``/dev/shm`` a confined worker may write
(``ktui.worker.confine``), and shared by every process of the host that shares its ``/dev/shm``:

- a timed section (``take``: a benchmark, a profiler's profiled call) holds ``<gpu>.lock``
  exclusively; it first holds ``<gpu>.gate``, so that the GPU's other users, which keep coming,
  cannot keep it waiting for ever;
- any other GPU work (``share``: the ladder's rungs that run kernels, the process a sanitizer wraps,
  a profiled process up to its profiled call) passes the gate and holds ``<gpu>.lock`` shared: many
  at once, never beside a timed section.

Either waits a bounded time, then goes on anyway and says so. Processes that are not ktui are not
held back by it. One process holds one turn at a time (a turn inside another would wait for itself).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ktui.worker.timing.device_id import pci_bus_id_of, uuid_of

WAIT_S = 60.0  # a timed section's wait (the benchmark rung's limit is 120 s)
SHARE_WAIT_S = 100.0  # other GPU work's wait, before its rung starts (the ladder allows 120 s between rungs)
POLL_S = 0.005
SHARED_MEMORY = Path("/dev/shm")


def lock_dir() -> Path:
    """Where the lock files live: ``/dev/shm`` where the host has it, else the temp folder."""
    base = SHARED_MEMORY if SHARED_MEMORY.is_dir() else Path(tempfile.gettempdir())
    return base / "ktui-gpu-locks"


@dataclass
class Turn:
    """How a section got (or did not get) its turn on the GPU; ``release``, or the end of its
    ``with`` block, ends it."""

    waited_s: float = 0.0
    held: bool = False  # the section had its turn (it stays true once released)
    note: str = ""  # why the section ran without its turn, when it did
    _fds: list[int] = field(default_factory=list)  # what this turn locked, until ``release``

    def figures(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.waited_s >= 0.01:
            out["gpu_wait_s"] = round(self.waited_s, 3)
        if not self.held:
            out["gpu_lock"] = self.note
        return out

    def release(self) -> None:
        while self._fds:
            fcntl.flock(self._fds.pop(), fcntl.LOCK_UN)

    def __enter__(self) -> Turn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


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


def prepare() -> Path:
    """The lock folder, made if missing: a confined process (``ktui.worker.confine``) may write in
    it and nowhere else of ``/dev/shm``, so it is made before the process is confined."""
    folder = lock_dir()
    _folder(folder)
    return folder


def _folder(folder: Path) -> None:
    try:
        folder.mkdir(mode=0o1777)
        os.chmod(folder, 0o1777)  # every user's ktui shares it; the sticky bit keeps their files apart
    except FileExistsError:
        pass
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise OSError(errno.ENOTDIR, "a link or a file stands where the lock folder should be")


def _file_name(device_key: str, kind: str = "lock") -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in device_key)
    return f"{safe or 'gpu'}.{kind}"


def _files(device_key: str, directory: Path | None) -> tuple[int, int]:
    """The GPU's gate and lock descriptors."""
    folder = directory or lock_dir()
    return _descriptor(folder / _file_name(device_key, "gate")), _descriptor(folder / _file_name(device_key))


def _flock(fd: int, operation: int, deadline: float) -> str:
    """Lock ``fd`` by ``deadline``: "" when had, "busy" when the deadline passed, else what failed."""
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return ""
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return f"flock failed ({exc.strerror or exc})"
        if time.monotonic() >= deadline:
            return "busy"
        time.sleep(POLL_S)


def take(device_key: str, wait_s: float = WAIT_S, directory: Path | None = None) -> Turn:
    """The GPU named ``device_key`` to this section alone: wait at most ``wait_s`` for the gate and
    for its other users to finish; the turn says whether it was had."""
    return _turn(device_key, wait_s, directory, alone=True)


def share(device_key: str, wait_s: float = SHARE_WAIT_S, directory: Path | None = None) -> Turn:
    """Use the GPU named ``device_key`` beside other users but never beside a timed section (one
    running or waiting to): wait at most ``wait_s``; the turn says whether it was had."""
    return _turn(device_key, wait_s, directory, alone=False)


def _turn(device_key: str, wait_s: float, directory: Path | None, alone: bool) -> Turn:
    """The gate, then the lock, exclusive for a timed section (both kept) and shared for other work
    (the gate only passed through)."""
    turn = Turn()
    what = "timed" if alone else "ran"
    try:
        files = _files(device_key, directory)
    except OSError as exc:
        folder = directory or lock_dir()
        turn.note = f"{what} without the cross-process GPU lock: {folder} could not be used ({exc.strerror or exc})"
        return turn
    started = time.monotonic()
    problem = ""
    for fd in files:
        problem = _flock(fd, fcntl.LOCK_EX if alone else fcntl.LOCK_SH, started + wait_s)
        if problem:
            break
        turn._fds.append(fd)
    if not alone and turn._fds:
        fcntl.flock(turn._fds.pop(0), fcntl.LOCK_UN)  # past the gate: it is for timed sections to close
    turn.waited_s = time.monotonic() - started
    if problem:
        turn.release()
        if problem != "busy":
            turn.note = f"{what} without the cross-process GPU lock: {problem}"
        elif alone:
            turn.note = (f"timed while another ktui process was using this GPU: it kept the GPU for {wait_s:.0f} s, "
                         "so this measurement may include its work")
        else:
            turn.note = (f"ran while another ktui process was timing on this GPU (it kept the GPU for {wait_s:.0f} s): "
                         "its measurement may include this work")
    else:
        turn.held = True
    return turn


def device_key(index: int | None = None) -> str:
    """The current CUDA device as every process of the host names it (``device_id``)."""
    import torch

    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    return uuid_of(props) or pci_bus_id_of(props) or f"{props.name}-{index}"
