"""``ktui run`` stopped by a signal (SIGINT, SIGTERM, SIGHUP): the run in flight is cancelled the
way the watch cancels one — recorded ``cancelled`` with "stopped by SIGTERM" — and no other kernel
starts, so no run is left ``running`` in the history."""

from __future__ import annotations

import signal
import threading

from ktui.cli.exits import exit_stopped
from ktui.protocol.processes import stopped_by

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopping:
    """While entered, a signal cancels ``runner``'s run in flight and sets ``signum``; a second
    signal stops at once (KeyboardInterrupt)."""

    def __init__(self, runner):
        self.runner = runner
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Stopping:
        self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._previous.items():
            signal.signal(sig, old)

    def _handle(self, signum, frame) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt
        self.signum = signum
        # Not here: the handler may run while this thread holds the runner's lock.
        threading.Thread(target=self.runner.cancel, args=(stopped_by(signum),), daemon=True).start()

    @property
    def exit_code(self) -> int | None:
        """128 + the signal, as a shell reports a process it stopped; None while not stopped."""
        return None if self.signum is None else exit_stopped(self.signum)
