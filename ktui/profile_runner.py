"""Profiling from the watch loop: ``python -m ktui profile PATH --json`` in a child process.

The dashboard's ``p`` queues this as a scheduler task, so a profile never shares the GPU with a
run. The child is the CLI an agent would call, in its own process group (a save does not cancel
it; quitting the dashboard kills it); its JSON lines become ``watch_profile`` notices.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ktui.problem import Kernel
from ktui.scheduler import Notice

PROFILE_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ProfileProgress(Notice):
    type: ClassVar[str] = "watch_profile"
    kernel: str
    message: str


@dataclass(frozen=True)
class ProfileFinished(Notice):
    type: ClassVar[str] = "watch_profile_finished"
    kernel: str
    ok: bool
    message: str
    summary: dict[str, Any] | None = field(default=None)


def profile_command(kernel: Kernel) -> list[str]:
    """The CLI call for ``kernel``, naming the reference the loop judged it by, so the profile
    resolves the same kernel (format, modules, ``.ktui/``) as the runs beside it."""
    reference = ["--reference", str(kernel.reference)] if kernel.reference is not None else []
    return [sys.executable, "-m", "ktui", "profile", str(kernel.path), *reference, "--json"]


def profile_task(loop):
    """The scheduler task for ``loop``: profile one kernel, report progress through its listener."""

    def run(kernel: Kernel, cancelled: threading.Event) -> None:
        emit = loop.listener
        emit(ProfileProgress(kernel.id, "starting ktui profile"))
        env = dict(os.environ)
        package_parent = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = package_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            proc = subprocess.Popen(profile_command(kernel), cwd=kernel.root, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, errors="replace", env=env,
                                    start_new_session=True)
        except OSError as exc:
            emit(ProfileFinished(kernel.id, False, f"could not start ktui profile: {exc}"))
            return
        stderr: list[str] = []
        reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
        reader.start()
        timer = threading.Timer(PROFILE_TIMEOUT_S, lambda: _kill(proc))
        timer.start()
        watcher = threading.Thread(target=lambda: (cancelled.wait(), _kill(proc)), daemon=True)
        watcher.start()
        finished: ProfileFinished | None = None
        try:
            for line in proc.stdout:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if record.get("type") == "profile_progress":
                    emit(ProfileProgress(kernel.id, str(record.get("message", ""))))
                elif record.get("type") == "profile_finished":
                    finished = ProfileFinished(kernel.id, bool(record.get("ok")), str(record.get("message", "")),
                                               record.get("summary"))
            code = proc.wait()
        finally:
            timer.cancel()
            cancelled.set()  # releases the watcher thread
        reader.join(timeout=2)
        if finished is None:
            tail = "".join(stderr[-8:]).strip()
            finished = ProfileFinished(kernel.id, False, f"ktui profile exited with code {code} without a result"
                                       + (f": {tail}" if tail else ""))
        emit(finished)

    return run


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
