"""The parent's side of every child process ktui starts: its environment and how it is ended.

Workers, profiler targets, NVIDIA's tools and child ktui commands all start in a session of
their own, so that a keypress or a cancelled call reaches none of them by accident, and all are
ended here, the same way: the child's group and the group of every descendant, SIGTERM first when
a grace is given (ncu removes its lock file), SIGKILL after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import ktui
from ktui.protocol.processes import descendants, kill_all

PACKAGE_PARENT = str(Path(ktui.__file__).resolve().parent.parent)  # the folder ktui imports from
REAP_TIMEOUT_S = 10.0


def child_env(extra: dict | None = None) -> dict:
    """A child's environment: this ktui importable first, output unbuffered, then ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def end_tree(proc: subprocess.Popen, grace_s: float = 0.0, reap: bool = True) -> None:
    """End ``proc`` and everything it started (from any thread); returns once ``proc`` is reaped,
    or, with ``reap=False``, once every process of the tree has been sent SIGKILL."""
    if proc.poll() is None:
        tree = descendants(proc.pid)
        groups = _groups(proc.pid, tree)
        if grace_s > 0:
            _signal(groups, signal.SIGTERM)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and (proc.poll() is None
                                                   or any(_group_alive(g) for g in groups - {proc.pid})):
                time.sleep(0.05)
            # a descendant may have started a group during the grace; the dead child's orphans
            # are reparented, so the groups seen before the SIGTERM are the ones to finish
            more = descendants(proc.pid) if proc.poll() is None else []
            tree, groups = tree + more, groups | _groups(proc.pid, more)
        _signal(groups, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        kill_all(tree)
    if not reap:
        return
    try:
        proc.wait(timeout=REAP_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
        pass


def _groups(pid: int, tree: list[int]) -> set[int]:
    """The group ``pid`` leads (it started a session) and those of its descendants, never ours."""
    found = {pid}
    for child in tree:
        try:
            found.add(os.getpgid(child))
        except ProcessLookupError:
            continue
    found.discard(os.getpgrp())
    return found


def _signal(groups: set[int], signum: int) -> None:
    for group in groups:
        try:
            os.killpg(group, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
