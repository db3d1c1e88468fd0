"""Confining a process that runs user code: it may read everything but write only where a run must.

User code runs in the worker (and in the profiler's target and the reference audit). Without a
fence it could rewrite ``.ktui/history.db`` (a failed version made ``passed``, no trace) or touch
its own reference, which makes ``ktui watch`` run it again and again. On Linux (kernel ≥ 5.13) a
Landlock ruleset, applied before any user code and before any thread, handles only the
*write-type* rights, so reads stay free and writes succeed only beneath the folders named here:
the workspace's run folders, a private temp folder, the compilers' caches and ``/dev``. Children
(ptxas, cuobjdump, nvdisasm) inherit it. Where Landlock is missing the process says why it is
``not confined``; ``KTUI_NO_CONFINE=1`` turns confinement off on purpose.
"""

from __future__ import annotations

import atexit
import ctypes
import getpass
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ktui.protocol.processes import NO_CONFINE_ENV as OFF_ENV
from ktui.protocol.processes import TMP_ENV, WRITABLE_ENV
from ktui.worker.dsl.tilelang_nvcc import builds_folder

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # one number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Landlock's filesystem rights that change something (linux/landlock.h). EXECUTE, READ_FILE and
# READ_DIR are never handled: reading stays free. IOCTL_DEV (ABI 5) is never handled either: CUDA
# drives the GPU by ioctls on /dev/nvidia*, and an ioctl changes no file.
WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: rename or link across folders (Triton's cache renames into place)
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: named only to say it is left out
_ABI1_WRITES = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
                | MAKE_BLOCK | MAKE_SYM)


# The kernel's own interfaces a GPU process writes: device nodes, and /proc, which the CUDA driver
# writes while it starts (cuInit returned 304, "OS call failed", without it on the H200, 2026-12-02).
# Neither holds a workspace file: a path through /proc/self/root or /proc/self/fd is judged where it
# leads, so the history and the references stay out of reach.
SYSTEM_FOLDERS = (Path("/dev"), Path("/proc"))


def write_rights(abi: int) -> int:
    """The write-type rights a kernel of Landlock ``abi`` knows: all of them are handled."""
    rights = _ABI1_WRITES
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    return rights


@dataclass(frozen=True)
class Confinement:
    """What a process says about itself in its ``ready`` line, and every run in its summary."""

    confined: bool
    how: str  # "landlock ABI 7" or "not confined: <why>"

    def to_json(self) -> dict:
        return {"confined": self.confined, "confinement": self.how}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]  # the first field: every ABI accepts this size


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def _call(libc, number: int, *args) -> int:
    result = libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; OSError where there is none (old kernel, disabled at boot)."""
    return _call(_libc(), _SYS_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0),
                 ctypes.c_uint32(_CREATE_RULESET_VERSION))


def private_tmp(inside: Path | None = None) -> Path:
    """This process's temp folder, set as TMPDIR/TEMP/TMP so tempfile, Triton and ptxas use it: the
    parent's (``TMP_ENV``), else one made ``inside`` a folder it may write (so that it can remove it
    at exit), else one in the system's temp folder (whose empty shell a confined process leaves)."""
    given = os.environ.get(TMP_ENV)
    if given and Path(given).is_dir():
        folder = Path(given)
    else:
        folder = Path(tempfile.mkdtemp(prefix="ktui-tmp-", dir=inside))
        atexit.register(shutil.rmtree, folder, True)
    for name in ("TMPDIR", "TEMP", "TMP"):
        os.environ[name] = str(folder)
    tempfile.tempdir = None  # computed again from TMPDIR on next use
    return folder


def cache_folders(original_tmp: str) -> list[Path]:
    """Where the compilers keep what they compiled, so that a confined worker still reuses it:
    Triton's folder (TRITON_HOME, TRITON_CACHE_DIR…), CuTeDSL's cache (kept where it would be without
    the private temp folder), CUDA's JIT cache, torch's kernel cache, ktui's own builds of TileLang's
    CUDA sources (``tilelang_nvcc.builds_folder``). Made if missing."""
    home = Path.home()
    triton_home = Path(os.environ.get("TRITON_HOME") or home) / ".triton"
    folders = [triton_home, triton_home / "cache"]
    folders += [Path(os.environ[name]) for name in ("TRITON_CACHE_DIR", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR")
                if os.environ.get(name)]
    if not os.environ.get("CUTE_DSL_CACHE_DIR"):
        os.environ["CUTE_DSL_CACHE_DIR"] = str(Path(original_tmp) / _user() / "cutlass_python_cache")
    folders.append(Path(os.environ["CUTE_DSL_CACHE_DIR"]))
    folders.append(Path(os.environ.get("CUDA_CACHE_PATH") or home / ".nv" / "ComputeCache"))
    folders.append(Path(os.environ.get("PYTORCH_KERNEL_CACHE_PATH") or home / ".cache" / "torch" / "kernels"))
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        folders.append(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]))
    folders.append(builds_folder())
    return folders


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name for this uid (a container)
        return str(os.getuid())


def writable_from_env() -> list[Path]:
    """The folders the parent named for this process's runs (``WRITABLE_ENV``)."""
    return [Path(p) for p in os.environ.get(WRITABLE_ENV, "").split(os.pathsep) if p]


def confine(writable: Iterable[Path] = (), tmp_inside: Path | None = None) -> Confinement:
    """Give this process a private temp folder, then let it write only beneath ``writable``, that
    folder, the compilers' caches and ``/dev``. Call it before any thread starts and before any user
    code runs: Landlock binds the calling thread and what it starts, never threads already running."""
    writable = list(writable)
    original_tmp = tempfile.gettempdir()
    tmp = private_tmp(tmp_inside)
    if os.environ.get(OFF_ENV, "") not in ("", "0"):
        return Confinement(False, f"not confined: {OFF_ENV} is set")
    if sys.platform != "linux":
        return Confinement(False, f"not confined: Landlock needs Linux, this is {platform.system()}")
    try:
        abi = landlock_abi()
    except OSError as exc:
        return Confinement(False, f"not confined: Landlock is unavailable on Linux {platform.release()} "
                                  f"({exc.strerror}; it needs 5.13 or later, enabled)")
    threads = _threads()
    if threads > 1:
        return Confinement(False, f"not confined: {threads} threads were already running")
    folders = [*writable, tmp, *cache_folders(original_tmp), *SYSTEM_FOLDERS]
    try:
        _restrict(abi, folders)
    except OSError as exc:
        return Confinement(False, f"not confined: Landlock refused the ruleset ({exc.strerror})")
    return Confinement(True, f"landlock ABI {abi}")


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _restrict(abi: int, folders: list[Path]) -> None:
    libc = _libc()
    rights = write_rights(abi)
    attr = _RulesetAttr(rights)
    ruleset = _call(libc, _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                    ctypes.c_uint32(0))
    try:
        for folder in dict.fromkeys(folders):  # once each, in order
            try:
                folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(folder, os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY)
            except OSError:
                continue  # a cache that cannot exist here is one the process cannot write either
            try:
                rule = _PathBeneathAttr(rights, fd)
                _call(libc, _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH),
                      ctypes.byref(rule), ctypes.c_uint32(0))
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        _call(libc, _SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
