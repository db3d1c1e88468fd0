"""``ktui watch --headless`` in its own process, as an agent reads it: its JSON lines as they come."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class Headless:
    """The watcher on ``ws`` with ``flags`` (after ``--seed 0 --debounce-ms 50``); its processes carry
    ``KTUI_TEST_TAG=<tag>`` in their environment (``leftovers.tagged`` finds them)."""

    def __init__(self, ws: Path, *flags: str):
        self.tag = uuid.uuid4().hex
        env = {**os.environ, "PYTHONPATH": str(REPO), "KTUI_TEST_TAG": self.tag}
        self.proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--seed", "0",
                                      "--debounce-ms", "50", *flags], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=lambda: [self.lines.put(json.loads(line)) for line in self.proc.stdout],
                         daemon=True).start()

    def until(self, predicate, timeout: float = 180.0) -> dict:
        """The next line that ``predicate`` accepts (the lines before it are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            item = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            self.seen.append(item)
            if predicate(item):
                return item

    def stop(self, timeout: float = 60.0) -> int:
        """SIGINT, as a person's Ctrl-C; the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=timeout)
