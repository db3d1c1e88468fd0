"""After a stop signal the dashboard's process ends even if its terminal's teardown blocks."""

from __future__ import annotations

import threading
import time

import pytest

from ktui.tui.stop_watchdog import exit_when_stuck

pytestmark = pytest.mark.unit


def test_the_process_is_ended_a_grace_after_the_clean_up_and_not_before_it():
    cleaned, exits = threading.Event(), []
    thread = exit_when_stuck(cleaned, 129, grace_s=0.2, limit_s=30, exit=exits.append)
    time.sleep(0.3)
    assert exits == [], "ended while the run in flight was still being recorded"
    cleaned.set()
    started = time.monotonic()
    thread.join(timeout=120)  # a safety net: it ends a grace (0.2 s) after the clean-up
    assert exits == [129] and time.monotonic() - started >= 0.15


def test_a_clean_up_that_never_ends_is_bounded_too():
    exits = []
    exit_when_stuck(threading.Event(), 143, grace_s=0, limit_s=0.2, exit=exits.append).join(timeout=120)
    assert exits == [143]
