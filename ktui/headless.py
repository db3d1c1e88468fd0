"""``ktui watch DIR --headless``: the watch loop with no screen, every event as one JSON line.

For agents and scripts: the same stream the dashboard draws (the loop's events as in
``ktui run --json``, plus ``watch_*`` notices for saves, the queue, the watcher and the device),
flushed line by line. Stops on SIGINT/SIGTERM, cancelling the run in flight.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from typing import IO

from ktui.loop.events import Event, Output
from ktui.scheduler import Notice
from ktui.watchloop import WatchLoop


class JsonLines:
    """A thread-safe listener that writes each event/notice as a JSON line."""

    def __init__(self, out: IO[str] | None = None, with_output: bool = False):
        self.out = out or sys.stdout
        self.with_output = with_output
        self._lock = threading.Lock()

    def __call__(self, item: Event | Notice) -> None:
        if isinstance(item, Output) and not self.with_output:
            return
        line = item.dumps() if isinstance(item, Event) else json.dumps(item.to_json(), default=str)
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()


def run(loop: WatchLoop) -> int:
    stop = threading.Event()

    def handle(signum, frame) -> None:  # noqa: ARG001
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        loop.start()
        while not stop.wait(0.5):
            pass
    finally:
        loop.close()
        for sig, old in previous.items():
            signal.signal(sig, old)
    return 0
