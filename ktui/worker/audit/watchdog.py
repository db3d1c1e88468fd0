"""A time limit on each step of an audit, and the user's line a hang is told by.

The reference is user code: a ``generate_input`` or ``ref_kernel`` that never returns must not
hang ``ktui audit``. Each step (drawing a shape, judging one mutant) arms a timer; when it fires,
the main thread's stack is read for the innermost frame in the user's files, the step and that
line are reported (``ref_kernel did not return… at reference.py:12``), whatever user code started
is ended, and the process exits. The parent keeps its own, longer, limit for a hang that holds
the interpreter (see ``ktui.dispatch.auditor``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ktui.protocol import processes
from ktui.protocol.events import ErrorInfo
from ktui.worker.errors import location

EXIT_HUNG = 3


class Watchdog:
    def __init__(self, limit_s: float, user_files: Callable[[], Iterable[str]],
                 expired: Callable[[str, ErrorInfo], None], heartbeat: Callable[[str], None] = lambda what: None):
        self.limit_s = limit_s
        self.user_files = user_files
        self.expired = expired
        self.heartbeat = heartbeat

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.heartbeat(what)
        timer = threading.Timer(self.limit_s, self._fire, (what, threading.get_ident()))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def _fire(self, what: str, thread: int) -> None:
        frame = sys._current_frames().get(thread)
        loc = None
        user = {str(Path(f).resolve()) for f in self.user_files()}
        while frame is not None:  # innermost first: the first user frame is where it is stuck
            file = frame.f_code.co_filename
            if _resolved(file) in user:
                loc = location(file, frame.f_lineno)
                where = f" — stuck in {frame.f_code.co_name} at {Path(file).name}:{frame.f_lineno}"
                break
            frame = frame.f_back
        else:
            where = ""
        message = f"{what}: no answer within {self.limit_s:g} s{where}"
        try:
            self.expired(message, ErrorInfo(type="TimeoutError", message=message, location=loc))
        finally:
            processes.end_descendants()
            os._exit(EXIT_HUNG)


def _resolved(file: str) -> str:
    try:
        return str(Path(file).resolve())
    except OSError:
        return file
