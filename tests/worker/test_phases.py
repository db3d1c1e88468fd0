"""A rung's phases: named stopwatches whose times add up to no more than the rung took."""

import pytest

from ktui.worker import phases as phases_module
from ktui.worker.phases import Phases

pytestmark = pytest.mark.unit


@pytest.fixture
def clock(monkeypatch):
    """A clock that moves only when told: the phases' arithmetic, not the machine's speed."""
    now = [100.0]
    monkeypatch.setattr(phases_module.time, "perf_counter", lambda: now[0])

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


def test_a_phase_inside_another_is_not_counted_twice(clock):
    phases = Phases()
    with phases.timing("metrics"):
        clock(1.0)
        with phases.timing("error map"):
            clock(5.0)
        clock(2.0)
    assert phases.take() == {"metrics": 3.0, "error map": 5.0}


def test_the_same_phase_twice_adds_up(clock):
    phases = Phases()
    for _ in range(2):
        with phases.timing("inputs"):
            clock(0.25)
    assert phases.take() == {"inputs": 0.5}
