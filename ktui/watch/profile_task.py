"""Profiling from the watch loop: ``python -m ktui profile PATH --json`` in a child process.

The dashboard's ``p`` queues this as a scheduler task, so a profile never shares the GPU with a
run. The child is the CLI an agent would call (``ktui.dispatch.child``: its own session, so a save does
not cancel it; quitting the dashboard kills it and what it started); its JSON lines become
``profile_task`` notices.
"""

from __future__ import annotations

import threading

from ktui.dispatch.child import KtuiChild, ktui_argv
from ktui.dispatch.owner import TURN_HELD_ENV
from ktui.protocol.notices import ProfileFinished, ProfileProgress
from ktui.workspace.kernels import Kernel

PROFILE_TIMEOUT_S = 900.0


def profile_command(kernel: Kernel) -> list[str]:
    """The CLI call for ``kernel``, naming the reference the loop judged it by, so the profile
    resolves the same kernel (format, modules, ``.ktui/``) as the runs beside it."""
    return ktui_argv("profile", kernel.path, kernel.reference)


def profile_task(loop):
    """The scheduler task for ``loop``: profile one kernel, report progress through its listener."""

    def run(kernel: Kernel, cancelled: threading.Event) -> None:
        emit = loop.listener
        emit(ProfileProgress(kernel.id, "starting ktui profile"))
        try:
            # This task is the profile's turn on the GPU: its child does not ask the owner for one.
            child = KtuiChild(profile_command(kernel), kernel.root, env={TURN_HELD_ENV: "1"})
        except OSError as exc:
            emit(ProfileFinished(kernel.id, False, f"could not start ktui profile: {exc}"))
            return
        timer = threading.Timer(PROFILE_TIMEOUT_S, child.kill)
        timer.start()
        watcher = threading.Thread(target=lambda: (cancelled.wait(), child.kill()), daemon=True)
        watcher.start()
        finished: ProfileFinished | None = None
        try:
            for record in child.records():
                if record.get("type") == "profile_progress":
                    emit(ProfileProgress(kernel.id, str(record.get("message", ""))))
                elif record.get("type") == "profile_finished":
                    finished = ProfileFinished(kernel.id, bool(record.get("ok")), str(record.get("message", "")),
                                               record.get("summary"))
            code = child.wait()
        finally:
            timer.cancel()
            cancelled.set()  # releases the watcher thread
        if finished is None:
            tail = child.stderr_tail()
            finished = ProfileFinished(kernel.id, False, f"ktui profile exited with code {code} without a result"
                                       + (f": {tail}" if tail else ""))
        emit(finished)

    return run
