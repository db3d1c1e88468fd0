"""After a stop signal, the dashboard's process ends even when its terminal is gone.

SIGHUP (the terminal closed: a tmux pane killed, an ssh link dropped) and SIGTERM end the dashboard
as ``q`` does: the run in flight is recorded ``cancelled`` and the workspace released. Textual then
gives the terminal back; on a terminal that no longer exists its writer thread can block for good
(seen: the main thread waiting to queue the writer's stop, the writer waiting on its queue), and a
dashboard nobody can see would live on, holding its warm worker's memory. Once ktui's own clean-up
is done, Textual gets ``grace_s`` to finish; then the process exits with the signal's code.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable

GRACE_S = 3.0  # after the clean-up, how long the terminal's teardown may take
CLEANUP_LIMIT_S = 60.0  # the clean-up itself (a run cancelled, its worker reaped) is bounded well inside this


def exit_when_stuck(cleaned: threading.Event, code: int, grace_s: float = GRACE_S,
                    limit_s: float = CLEANUP_LIMIT_S, exit: Callable[[int], None] = os._exit) -> threading.Thread:
    """Start the watchdog: ``exit(code)`` once ``cleaned`` is set (or ``limit_s`` has passed) and
    ``grace_s`` more have, unless the process has ended by then (the thread is a daemon)."""

    def watch() -> None:
        cleaned.wait(limit_s)
        time.sleep(grace_s)
        exit(code)

    thread = threading.Thread(target=watch, name="ktui-stop-watchdog", daemon=True)
    thread.start()
    return thread
