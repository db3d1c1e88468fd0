"""A worker's first calibration of its GPU, measured for it by a process that is not confined.

The first benchmark on a GPU kind with no calibration needs one, and its worker may not keep one:
the sandbox lets the worker read the user's calibrations, never write them, so that no kernel under
test can forge the launch floor and ceilings that every later verdict on that GPU kind is held to
(docs/sandbox.md). The worker asks (``ktui.measure.calibrate.ASK``, ``ktui.worker.parent``); its
runner (``ktui.dispatch.runner``) starts the measuring process ``python -m
ktui.worker.timing.calibrate --first`` beside it through its transport (``Transport.beside``: on the
worker's host — the remote's with ``--remote``, the Ray node's — for its GPU, not confined), while
the run is in flight, so inside the run's turn on the GPU. That process takes the device key's lock
(two processes that need one at once measure it once), measures where none is kept, and keeps it in
the user's folder. Each step goes to the worker as it comes (``PROGRESS``: the benchmark tells it as
a note of its rung, which restarts the rung's time limit), then what was obtained (``ANSWER``); the
worker reads back what was kept. A run that ends first (cancelled, timed out, crashed) ends the
measurement with it: nothing half measured is kept.
"""

from __future__ import annotations

import collections
import threading

from ktui.dispatch.proc import end_tree
from ktui.dispatch.transport import Command
from ktui.dispatch.worker_protocol import WorkerProcess
from ktui.measure.calibrate import ANSWER, PROGRESS, Obtained, Reply, read_reply
from ktui.protocol.processes import describe_exit

MEASURING = Command("ktui.worker.timing.calibrate", ("--first",))
STDERR_TAIL = 8  # lines of a failed measuring process quoted in the answer's note


class Measuring:
    """The measurement one worker asked for: the measuring process beside it, its lines read on a
    thread of its own and answered to the worker as they come."""

    def __init__(self, worker: WorkerProcess):
        self.worker = worker
        self._stopped = threading.Event()
        self._answered = threading.Event()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        try:
            self.proc = worker.proc.beside(MEASURING)
        except OSError as exc:  # it could not start: the worker hears why, and its roofline stays provisional
            self.proc = None
            self._answer(Obtained(None, note=f"the calibration process could not start ({exc.strerror or exc})"))
            self._thread = None
            return
        self._errors = threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr),
                                        name="ktui-calibration-stderr", daemon=True)
        self._errors.start()
        self._thread = threading.Thread(target=self._follow, name="ktui-calibration", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the worker still waits for this measurement's answer. Over once the answer is on
        its way, not when the thread ends: a worker answered at once may ask again (a measurement that
        failed) before this thread has returned, and that ask must start a measurement of its own."""
        return self._thread is not None and not self._answered.is_set()

    def _follow(self) -> None:
        reply = read_reply(self.proc.stdout, self._progress)
        code = self.proc.wait()
        self._errors.join(timeout=2.0)
        self._answer(self._obtained(reply, code))

    def _progress(self, text: str) -> None:
        if not self._stopped.is_set():
            self.worker.answer({"type": PROGRESS, "text": text})

    def _answer(self, obtained: Obtained) -> None:
        self._answered.set()
        if not self._stopped.is_set():
            self.worker.answer({"type": ANSWER, "obtained": obtained.to_json()})

    def _obtained(self, reply: Reply, code: int | None) -> Obtained:
        """What the benchmark uses: what the process obtained, or why it obtained nothing."""
        if reply.obtained is not None:
            return Obtained.from_json(reply.obtained)
        if reply.error:
            return Obtained(None, note=reply.error)
        tail = " ".join(line.strip() for line in self._stderr if line.strip())
        return Obtained(None, note=f"the calibration process ended ({describe_exit(code)}) with no answer"
                                   + (f": {tail[-300:]}" if tail else ""))

    def stop(self) -> None:
        """End the measurement (its run is over): nothing more reaches the worker, nothing is kept."""
        self._stopped.set()
        if self.proc is not None:
            end_tree(self.proc)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
