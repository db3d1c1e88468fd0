"""Processes a test left behind: ktui commands and workers that outlived the test that started them.

A test's own children (the session's warm worker, its sshd) are still its descendants; a process
that lost its parent (a dashboard whose terminal was killed, a worker whose runner died) is
re-parented away from pytest. Those orphans, new since the test began, are what it leaked.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ktui.protocol.processes import descendants

PROC = Path("/proc")


def is_ktui(argv: list[str]) -> bool:
    """A ktui command (``python -m ktui …``, the ``ktui`` script) or a ktui worker."""
    if not argv:
        return False
    if Path(argv[0]).name == "ktui":
        return True
    for i, word in enumerate(argv[:-1]):
        if word == "-m" and argv[i + 1].split(".")[0] == "ktui":
            return True
    return len(argv) > 1 and Path(argv[0]).name.startswith("python") and Path(argv[1]).name == "ktui"


@dataclass(frozen=True)
class Proc:
    pid: int
    argv: tuple[str, ...]
    cwd: str = ""  # "" where it cannot be read


def processes() -> dict[int, Proc]:
    """Every process this user can see, by pid (those that vanish while read are left out; a
    zombie's argv is empty)."""
    found: dict[int, Proc] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        found[int(entry.name)] = Proc(int(entry.name), tuple(a.decode(errors="replace") for a in argv if a), cwd)
    return found


def tagged(variable: str, tag: str) -> list[int]:
    """Live processes (zombies left out) whose environment sets ``variable`` to ``tag``: what a test
    started with that tag, and everything those started."""
    wanted = f"{variable}={tag}".encode()
    pids = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if wanted in environ.split(b"\0") and state != "Z":
            pids.append(int(entry.name))
    return pids


def session_root() -> int:
    """The pytest process every test's processes descend from: under pytest-xdist, the controller
    whose children the workers are (another worker's processes are not orphans)."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


def orphans(before: set[int], matches: Callable[[list[str]], bool] = is_ktui, within: str = "/") -> list[Proc]:
    """Matching processes started since ``before`` (a set of pids), working in a folder under
    ``within`` (this pytest worker's temporary folders: another worker's tests, running at the same
    time, work elsewhere), that do not descend from the pytest session. A dashboard in tmux is the
    tmux server's child: it is an orphan by this rule while its test runs, so the rule is asked only
    once the test is over."""
    ours = {session_root(), *descendants(session_root())}
    inside = os.path.join(os.path.realpath(within), "")
    return [p for p in processes().values()
            if p.pid not in before and p.pid not in ours and matches(list(p.argv))
            and os.path.join(p.cwd, "").startswith(inside)]


def left_behind(before: set[int], grace_s: float = 30.0, matches: Callable[[list[str]], bool] = is_ktui,
                within: str = "/") -> list[Proc]:
    """The orphans still alive after ``grace_s`` (a process that is stopping gets that long), each
    then killed so one leak does not pile up behind the next test."""
    deadline = time.monotonic() + grace_s
    found = orphans(before, matches, within)
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = orphans(before, matches, within)
    for proc in found:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    return found
