"""After a calibration the GPU's clocks are let recover before the first benchmark: a kernel timed
at a power cap would read as short of its roofline. Driven by a scripted clock reader and clock."""

import pytest

from ktui.worker.timing.clocks import ClockReading, settle

pytestmark = pytest.mark.unit

POWER_CAP, IDLE = 0x4, 0x1


class Scripted:
    """A clock monitor whose readings follow a script, on a clock the test advances."""

    available, cheap, source = True, True, "nvml"

    def __init__(self, reasons: list[int]):
        self.reasons, self.t = list(reasons), 0.0

    def read(self) -> ClockReading:
        return ClockReading(1980, 3201, self.reasons.pop(0) if len(self.reasons) > 1 else self.reasons[0])

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def test_the_clocks_count_as_recovered_only_after_a_quiet_spell_with_no_throttling_reason():
    clocks, told = Scripted([POWER_CAP] * 20 + [IDLE]), []
    got = settle(clocks, told.append, limit_s=15, quiet_s=1.0, every_s=0.1, now=clocks.now, sleep=clocks.sleep)
    assert got["settled"] is True and got["reasons"] == ["sw_power_cap"]
    assert got["waited_s"] == pytest.approx(2.9, abs=0.11)  # the last capped reading at 1.9 s, then 1 s quiet
    assert told == ["letting the GPU's clocks recover (sw_power_cap)"]  # said once


def test_a_gpu_that_stays_throttled_is_waited_for_no_longer_than_the_limit_and_says_so():
    clocks = Scripted([0x40])  # thermal slowdown, for good
    got = settle(clocks, limit_s=5, quiet_s=1.0, every_s=0.1, now=clocks.now, sleep=clocks.sleep)
    assert got == {"settled": False, "waited_s": pytest.approx(5.0, abs=0.11), "reasons": ["hw_thermal_slowdown"]}


def test_without_a_clock_source_nothing_is_waited_for():
    clocks = Scripted([0])
    clocks.available, clocks.source = False, "unavailable: nvidia-smi not found"
    assert settle(clocks, now=clocks.now, sleep=clocks.sleep) == {"settled": None, "why": "unavailable: nvidia-smi not found"}
    assert clocks.t == 0
