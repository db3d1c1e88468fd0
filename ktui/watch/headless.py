"""``ktui watch DIR --headless``: the watch loop with no screen, every event as one JSON line.

For agents and scripts: the same stream the dashboard draws (the loop's events as in
``ktui run --json``, plus the notices of ``ktui.protocol.notices``: saves, the queue, the watcher, the device),
flushed line by line. Stops on SIGINT/SIGTERM or when its reader closes the pipe, cancelling
the run in flight.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import IO

from ktui.protocol.events import Event, Output
from ktui.protocol.notices import Notice
from ktui.protocol.processes import stopped_by
from ktui.watch.loop import WatchLoop
from ktui.watch.view import WatchView


class JsonLines:
    """A thread-safe listener that writes each event/notice as a JSON line."""

    def __init__(self, out: IO[str] | None = None, with_output: bool = False):
        self.out = out or sys.stdout
        self.with_output = with_output
        self.closed = False  # the reader went away: nobody is listening, so the watch should stop
        self._lock = threading.Lock()

    def __call__(self, item: Event | Notice) -> None:
        if self.closed or (isinstance(item, Output) and not self.with_output):
            return
        line = item.dumps() if isinstance(item, Event) else json.dumps(item.to_json(), default=str)
        with self._lock:
            try:
                self.out.write(line + "\n")
                self.out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.closed = True


def run(loop: WatchLoop | WatchView, printer: JsonLines) -> int:
    """Print the loop's (or the daemon's, for a view) stream until a signal, the reader's end, or
    the daemon's."""
    stopping: list[int] = []

    def handle(signum, frame) -> None:
        # No locks here: a handler runs in the main thread between two bytecodes, possibly while
        # that thread holds a lock it would then wait for forever (an Event's, for one).
        stopping.append(signum)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        loop.start()
        while not stopping and not printer.closed and not loop.gone.is_set():
            time.sleep(0.2)  # a signal cuts the sleep short
    finally:
        loop.close(stop_reason(stopping, printer))
        for sig, old in previous.items():
            signal.signal(sig, old)
    return 0


def stop_reason(signals: list[int], printer: JsonLines) -> str:
    """The message of the run in flight, cancelled: ``cancelled: stopped by SIGTERM: the watcher is stopping``."""
    if signals:
        return f"{stopped_by(signals[0])}: the watcher is stopping"
    if printer.closed:
        return "cancelled: the watcher stopped: its reader closed the pipe"
    return "cancelled: the watcher stopped"
