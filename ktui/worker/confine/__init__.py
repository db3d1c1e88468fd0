"""Confining a process that runs user code: a kernel under test can compute, and nothing else.

User code runs in the worker (and its compile-ahead helpers), the profiler's target and the
reference audit. Each applies, before any user code and before any thread, a Landlock ruleset
(``landlock``) whose rules (``rules``) let it read what building and running a kernel needs (and,
the worker, the user's calibrations, which it never writes) and write only its run folders, a
private temp folder and ktui's own compiler caches (``caches``), and
a seccomp filter (``network``) that leaves it Unix sockets only, unless the user allows the network
(``--allow-network``). What it starts (ptxas, nvcc, a shell) inherits all of it. Where Landlock is
missing the process says why it is ``not confined``; ``KTUI_NO_CONFINE=1`` turns confinement off on
purpose. The line it says of itself (``protocol.sandbox``) names the protections that held.
"""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ktui.protocol import sandbox
from ktui.protocol.processes import NO_CONFINE_ENV as OFF_ENV
from ktui.protocol.processes import READABLE_ENV, TMP_ENV, WRITABLE_ENV
from ktui.worker.confine import caches, network
from ktui.worker.confine.landlock import (
    IOCTL_DEV,
    NETWORK_ABI,
    REFER,
    SCOPES_ABI,
    TRUNCATE,
    landlock_abi,
    restrict,
    write_rights,
)
from ktui.worker.confine.rules import gpu_nodes_made, has_gpu_driver, rules

__all__ = ["IOCTL_DEV", "REFER", "TRUNCATE", "Confinement", "confine", "landlock_abi", "private_tmp",
           "readable_from_env", "writable_from_env", "write_rights"]


@dataclass(frozen=True)
class Confinement:
    """What a process says about itself in its ``ready`` line, and every run in its summary."""

    confined: bool
    how: str  # "landlock ABI 7: writes, reads, network, signals" or "not confined: <why>"

    def to_json(self) -> dict:
        return {"confined": self.confined, "confinement": self.how}


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


def _paths(variable: str) -> list[Path]:
    return [Path(p) for p in os.environ.get(variable, "").split(os.pathsep) if p]


def writable_from_env() -> list[Path]:
    """The folders the parent named for this process's runs (``WRITABLE_ENV``)."""
    return _paths(WRITABLE_ENV)


def readable_from_env() -> list[Path]:
    """The workspaces (and files kept elsewhere) the parent named for this process's runs to read
    (``READABLE_ENV``)."""
    return _paths(READABLE_ENV)


def confine(writable: Iterable[Path] = (), readable: Iterable[Path] = (), tmp_inside: Path | None = None,
            network_allowed: str = "", fresh_caches: bool = False, wrapped_by: str = "",
            read_only: Iterable[Path] = ()) -> Confinement:
    """Give this process a private temp folder, then confine it (see the module docstring): it
    writes beneath ``writable``, reads ``readable`` as workspaces and ``read_only`` whole (folders
    made first, so that what is kept there later is read too); the network stays closed unless
    ``network_allowed`` says why it is open; ``fresh_caches`` (a strict run) gives it compiler caches
    of its own in its temp folder; ``wrapped_by`` (a tool that injects itself into this process:
    Nsight Compute, compute-sanitizer) leaves it the network and /dev/shm, how such tools talk to
    their target. Call it before any thread starts and before any user code runs: Landlock binds
    the calling thread and what it starts, never threads already running."""
    writable, readable = list(writable), list(readable)
    system_tmp = Path(tempfile.gettempdir())
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
    open_network = bool(network_allowed or wrapped_by)
    cache_env = caches.environment(caches.folder(tmp if fresh_caches else None))
    gpu = has_gpu_driver()
    if gpu:
        gpu_nodes_made()  # before the rules: they open the nodes that exist now, and the sandbox makes none
    folders = rules(abi, writable, readable, tmp, [Path(p) for p in cache_env.values()], system_tmp,
                    network=open_network, gpu=gpu, shared_memory=bool(wrapped_by), read_only=read_only)
    try:
        restrict(abi, folders, network=open_network)
    except OSError as exc:
        return Confinement(False, f"not confined: Landlock refused the ruleset ({exc.strerror})")
    os.environ.update(cache_env)  # only now: an unconfined process never uses ktui's caches
    held, gaps = [sandbox.WRITES, sandbox.READS], []
    if abi < 3:
        gaps.append("not held: truncation (Landlock ABI 3)")
    if wrapped_by:
        gaps.append(f"network and /dev/shm open: {wrapped_by} wraps this process")
    elif network_allowed:
        gaps.append(f"network allowed: {network_allowed}")
    else:
        _close_network(abi, held, gaps)
    if abi >= SCOPES_ABI:
        held.append(sandbox.SIGNALS)
    else:
        gaps.append(f"not held: signals and abstract sockets (Landlock ABI {SCOPES_ABI})")
    return Confinement(True, sandbox.describe(abi, held, gaps))


def _close_network(abi: int, held: list[str], gaps: list[str]) -> None:
    """The seccomp filter on top of Landlock's TCP rules; what held goes to ``held``, what did not to ``gaps``."""
    try:
        network.deny_network()
    except OSError as exc:
        if abi >= NETWORK_ABI:
            held.append(f"{sandbox.NETWORK} (TCP)")
            gaps.append(f"not held: other sockets ({exc.strerror})")
        else:
            gaps.append(f"not held: network ({exc.strerror}; Landlock's TCP rules need ABI {NETWORK_ABI})")
        return
    held.append(sandbox.NETWORK)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1
