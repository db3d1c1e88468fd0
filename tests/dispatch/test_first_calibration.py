"""A worker answered at once may ask for its calibration again (the first measurement failed, so it
keeps none) before the thread that answered it has returned: that ask is measured again, never
left waiting for an answer that will not come."""

import json
import subprocess
import sys
import threading

import pytest

from ktui.dispatch.first_calibration import Measuring
from ktui.measure.calibrate import ANSWER

pytestmark = pytest.mark.worker

FAILING = [sys.executable, "-c", "print(" + repr(json.dumps({"error": "out of memory"})) + ")"]


class Worker:
    """The runner's view of a worker: a measuring process started beside it, answers written to it.
    At each answer it asks again at once, as a kernel whose measurement failed does, and records
    whether that ask would start a measurement (``Runner._measure`` starts one when none runs)."""

    def __init__(self):
        self.proc = self
        self.measuring: Measuring | None = None
        self.constructed = threading.Event()
        self.asked_again_while_running: list[bool] = []
        self.answered = threading.Event()

    def beside(self, command) -> subprocess.Popen:
        return subprocess.Popen(FAILING, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    def answer(self, message: dict) -> bool:
        if message["type"] == ANSWER:
            self.constructed.wait(timeout=30)
            self.asked_again_while_running.append(self.measuring.running)
            self.answered.set()
        return True


def test_an_ask_right_after_a_failed_measurement_s_answer_starts_a_new_measurement():
    worker = Worker()
    worker.measuring = Measuring(worker)
    worker.constructed.set()
    assert worker.answered.wait(timeout=60), "the failed measurement was never answered"
    worker.measuring.stop()
    assert worker.asked_again_while_running == [False]
