"""A ktui command in a child process: ``python -m ktui VERB ... --json``, JSON lines out, killable.

The dashboard's ``p`` and the MCP server's ``profile``/``sanitize`` call the CLI an agent would
call, in its own session so that nothing the caller does (a save, a cancelled tool call) reaches
it by accident and a kill reaches all of it. The CLI starts ncu, compute-sanitizer and the
kernel's target with ``run_tool``, each in a session of its own, so killing the child's process
group alone would leave them running until their own time limit: ``kill`` ends the whole tree
(``ktui.dispatch.proc.end_tree``), with a grace for ncu to remove its lock file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ktui.dispatch.proc import child_env, end_tree

KILL_GRACE_S = 2.0


def ktui_argv(verb: str, path: Path, reference: Path | None, *flags: str) -> list[str]:
    """``python -m ktui VERB PATH [--reference REF] FLAGS --json``, with this interpreter."""
    named = ["--reference", str(reference)] if reference is not None else []
    return [sys.executable, "-m", "ktui", verb, str(path), *named, *flags, "--json"]


class KtuiChild:
    """One running ktui command; ``records`` are its JSON stdout lines, stderr is kept for errors."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors="replace", env=child_env(env or {}),
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
        """End the child and everything it started (from any thread); returns once it is reaped."""
        end_tree(self.proc, grace_s)
