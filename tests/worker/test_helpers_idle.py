"""A warm worker's compile-ahead helpers end after a pause with no job, never under one, and come
back with the next job (``ktui.worker.main.IdleHelpers``; the helpers themselves run only on a GPU)."""

from __future__ import annotations

import threading

import pytest

from ktui.worker.main import IdleHelpers

pytestmark = pytest.mark.unit


class Pool:
    """The part of ``AheadPool`` the idle clock drives: ``close`` ends its helpers."""

    def __init__(self) -> None:
        self.closed = threading.Event()
        self.closes = 0

    def close(self) -> None:
        self.closes += 1
        self.closed.set()


def test_the_helpers_end_once_no_job_came_for_the_idle_time():
    pool = Pool()
    idle = IdleHelpers(pool, 0.05)
    with idle.busy():
        pass
    assert pool.closed.wait(10), "the helpers outlived the idle time"
    assert pool.closes == 1
    idle.stop()


def test_a_job_that_comes_in_time_keeps_the_helpers_and_none_end_under_a_job():
    pool = Pool()
    idle = IdleHelpers(pool, 0.2)
    with idle.busy():
        pass
    with idle.busy():  # the next job, before the first pause ended
        assert not pool.closed.wait(0.5), "the helpers ended under a job"
    assert pool.closed.wait(10)
    assert pool.closes == 1, "the first pause's timer ended nothing: a job came"
    idle.stop()
