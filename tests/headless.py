"""``ktui watch --headless`` in its own process, as an agent reads it: its JSON lines as they come."""

from __future__ import annotations

import collections
import json
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from conftest import child_env


class Headless:
    """The watcher on ``ws`` with ``flags`` (after ``--seed 0 --debounce-ms 50``); its processes carry
    ``KTUI_TEST_TAG=<tag>`` in their environment (``leftovers.tagged`` finds them)."""

    def __init__(self, ws: Path, *flags: str):
        self.tag = uuid.uuid4().hex
        env = child_env({"KTUI_TEST_TAG": self.tag})
        self.proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--seed", "0",
                                      "--debounce-ms", "50", *flags], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue[dict | None] = queue.Queue()
        self.seen: list[dict] = []
        self.stderr: collections.deque[str] = collections.deque(maxlen=40)  # drained: a full pipe would stall it
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))
        self.lines.put(None)  # its stdout closed: the watcher ended

    def until(self, predicate, timeout: float = 180.0) -> dict:
        """The next line that ``predicate`` accepts (the lines before it are kept in ``seen``); an
        AssertionError with the watcher's exit and last stderr lines when none comes."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                item = None
            if item is None:
                code = self.proc.poll()
                state = "still runs" if code is None else f"exited {code}"
                raise AssertionError(f"no line the test waits for within {timeout:g} s; the watcher {state}, "
                                     f"its stderr ends:\n{''.join(self.stderr)}")
            self.seen.append(item)
            if predicate(item):
                return item

    def stop(self, timeout: float = 60.0) -> int:
        """SIGINT, as a person's Ctrl-C; the exit code."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=timeout)
