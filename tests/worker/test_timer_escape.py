"""The timer-escape check on a scripted clock: another process's turn on the GPU slows a round,
hidden work slows every round (the check itself runs in the worker's benchmark rung)."""

import pytest

from ktui.worker import integrity

pytestmark = pytest.mark.unit


@pytest.fixture
def clock(monkeypatch):
    """A fake ``time.perf_counter`` advanced by the scripted calls; ``synchronize`` does nothing."""
    now = [0.0]
    monkeypatch.setattr(integrity.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(integrity.torch.cuda, "synchronize", lambda: None)
    return now


def calls_costing(clock, per_round_us):
    """A call whose cost in each round of 20 calls is ``per_round_us[round]`` µs."""
    made = [0]

    def call(_):
        clock[0] += per_round_us[min(made[0] // 20, len(per_round_us) - 1)] * 1e-6
        made[0] += 1

    return call, made


def test_a_round_slowed_by_another_process_is_retried_and_the_kernel_is_not_suspicious(clock):
    call, made = calls_costing(clock, [313.6, 4.5])
    escape = integrity.timer_escape(call, [()], event_us=4.4, host_us=3.0)
    assert not escape["escaped"] and escape["wall_us"] == pytest.approx(4.5)
    assert made[0] == 40  # the second round was within the bound: no third


def test_work_hidden_from_the_timer_in_every_round_is_caught(clock):
    call, made = calls_costing(clock, [313.6, 290.0, 300.0, 295.0, 310.0])
    escape = integrity.timer_escape(call, [()], event_us=4.4, host_us=3.0)
    assert escape["escaped"] and escape["wall_us"] == pytest.approx(290.0)
    assert made[0] == 100


def test_a_kernel_within_the_bound_is_timed_once(clock):
    call, made = calls_costing(clock, [5.0])
    assert not integrity.timer_escape(call, [()], event_us=4.4, host_us=3.0)["escaped"]
    assert made[0] == 20
