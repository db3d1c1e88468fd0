"""The process that started this worker, as the worker speaks to it: jobs come in on its input,
one JSON line each, and the worker may ask it for what its sandbox keeps it from doing itself.

One thing is asked: a calibration of the GPU, which the first benchmark on a GPU kind with none
needs (``ktui.worker.timing.calibrate.for_benchmark``). The worker may read the user's calibrations
but never write them (``ktui.worker.confine``): were it able to, a kernel under test could forge
the launch floor and ceilings that every later verdict on that GPU kind is held to. So it asks
(``ASK`` on its protocol channel); the parent measures in a process of its own, not confined
(``ktui.dispatch.calibrate``), and answers on the worker's input: each step as it comes
(``PROGRESS``), then what was obtained (``ANSWER``). The benchmark reads back what was kept.

The input is a private copy of the worker's stdin, taken before any user code runs; stdin itself
then reads ``/dev/null``, so user code reading it (``input()``) neither waits for nor takes a line
meant for the worker.
"""

from __future__ import annotations

import json
import os
from typing import IO, Callable, Iterator

from ktui.measure.calibrate import ANSWER, ASK, PROGRESS, Obtained, json_objects


def private_input() -> IO[str]:
    """The worker's input, kept for the protocol; stdin becomes ``/dev/null``."""
    stream = os.fdopen(os.dup(0), "r", encoding="utf-8", errors="replace")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return stream


class Parent:
    """The parent as the worker speaks to it: ``send`` writes one protocol line, ``stream`` is the
    worker's input."""

    def __init__(self, send: Callable[[dict], None], stream: IO[str]):
        self._send = send
        self._stream = stream

    def jobs(self) -> Iterator[str]:
        """Each job's line as it comes, until the input ends. An answer no one waited for (a kernel
        that asked and went on) is passed over: it never reads as the next job."""
        for line in self._stream:
            line = line.strip()
            if line and not _answer(line):
                yield line

    def calibration(self, progress: Callable[[str], None]) -> Obtained:
        """Ask for this GPU's calibration: measured by the parent's measuring process where none is
        kept, each of its steps told through ``progress``; what it obtained (``Obtained``)."""
        self._send({"type": ASK})
        for message in json_objects(self._stream):
            if message.get("type") == PROGRESS:
                progress(str(message.get("text", "")))
            elif message.get("type") == ANSWER:
                obtained = message.get("obtained")
                return Obtained.from_json(obtained if isinstance(obtained, dict) else {})
        return Obtained(None, note="the worker's parent closed its input before it answered")


def _answer(line: str) -> bool:
    """Whether ``line`` is an answer to an ask (``PROGRESS``, ``ANSWER``), not a job."""
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(message, dict) and message.get("type") in (PROGRESS, ANSWER)
