"""A ktui command in a child process: ``python -m ktui VERB ... --json``, JSON lines out, killable.

The dashboard's ``p`` and the MCP server's ``profile``/``sanitize`` call the CLI an agent would
call, in its own session so that nothing the caller does (a save, a cancelled tool call) reaches
it by accident and a kill reaches all of it. The CLI starts ncu, compute-sanitizer and the
kernel's target with ``run_tool``, each in a session of its own, so killing the child's process
group alone would leave them running until their own time limit: ``kill`` ends the child's
descendants' groups too, SIGTERM first (ncu removes its lock file) and SIGKILL after a grace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ktui.external import child_env
from ktui.loop.processes import descendants

KILL_GRACE_S = 2.0


def ktui_argv(verb: str, path: Path, reference: Path | None, *flags: str) -> list[str]:
    """``python -m ktui VERB PATH [--reference REF] FLAGS --json``, with this interpreter."""
    named = ["--reference", str(reference)] if reference is not None else []
    return [sys.executable, "-m", "ktui", verb, str(path), *named, *flags, "--json"]


class KtuiChild:
    """One running ktui command; ``records`` are its JSON stdout lines, stderr is kept for errors."""

    def __init__(self, argv: list[str], cwd: Path):
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors="replace", env=child_env(),
                                     start_new_session=True)
        self._stderr: list[str] = []
        self._reader = threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True)
        self._reader.start()

    def records(self) -> Iterator[dict[str, Any]]:
        """The JSON objects it prints, until its stdout closes; other lines are skipped."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record

    def wait(self) -> int:
        code = self.proc.wait()
        self._reader.join(timeout=2)
        return code

    def stderr_tail(self, lines: int = 8) -> str:
        return "".join(self._stderr[-lines:]).strip()

    def kill(self, grace_s: float = KILL_GRACE_S) -> None:
        """End the child and everything it started (from any thread); returns once the child is reaped."""
        if self.proc.poll() is not None:
            return
        groups = _groups_under(self.proc.pid)
        _signal(groups, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and (self.proc.poll() is None
                                               or any(_group_alive(g) for g in groups - {self.proc.pid})):
            time.sleep(0.05)
        # A descendant may have started a group during the grace; the dead child's orphans are
        # reparented, so the groups seen before the SIGTERM are the ones to finish.
        _signal(groups | _groups_under(self.proc.pid), signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
            pass


def _groups_under(pid: int) -> set[int]:
    """The process groups of ``pid`` and of all its descendants (just its own where /proc says nothing)."""
    found = {pid}  # the child leads its own session: its pid is its group
    for child in descendants(pid):
        try:
            found.add(os.getpgid(child))
        except ProcessLookupError:
            continue
    found.discard(os.getpgrp())  # never the caller's own group
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
