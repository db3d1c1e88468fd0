"""Waiting for what a test needs on any machine: poll for the state it needs, with a limit that is
only a safety net. A loaded machine gets there later, never wrong (CONTRIBUTING.md: no test depends
on the machine being idle, so none asserts that something took less than some time)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")

SAFETY_S = 120.0  # what a test waits for comes long before this, however loaded the machine


def until(check: Callable[[], T], limit_s: float = SAFETY_S, every_s: float = 0.05) -> T:
    """``check()`` as soon as it is true, or what it last said once ``limit_s`` has passed."""
    deadline = time.monotonic() + limit_s
    while not (value := check()) and time.monotonic() < deadline:
        time.sleep(every_s)
    return value


def gone(left: Callable[[], T], limit_s: float = SAFETY_S, every_s: float = 0.05) -> T:
    """``left()`` (what is still there: processes, followers) once it is empty, or what it last
    said once ``limit_s`` has passed."""
    deadline = time.monotonic() + limit_s
    while (value := left()) and time.monotonic() < deadline:
        time.sleep(every_s)
    return value
