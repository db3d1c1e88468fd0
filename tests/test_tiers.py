"""The test tiers: every collected test has exactly one (tests/conftest.py refuses to run otherwise),
and a ``unit`` test that starts a process fails."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest
from conftest import ProcessStarted, tier_problems

pytestmark = pytest.mark.unit


class Collected:
    """What tier_problems reads of a collected test: its id and the markers it carries."""

    def __init__(self, nodeid: str, *marks: pytest.MarkDecorator):
        self.nodeid = nodeid
        self.marks = [m.mark for m in marks]

    def iter_markers(self):
        return iter(self.marks)


def test_a_test_with_no_tier_or_two_tiers_or_unit_on_a_gpu_is_named():
    items = [
        Collected("t.py::one", pytest.mark.unit),
        Collected("t.py::none", pytest.mark.slow),
        Collected("t.py::two", pytest.mark.unit, pytest.mark.worker),
        Collected("t.py::gpu", pytest.mark.gpu, pytest.mark.worker),
        Collected("t.py::gpu_unit", pytest.mark.gpu, pytest.mark.unit),
        Collected("t.py::twice", pytest.mark.e2e, pytest.mark.e2e),  # module and test: one tier
    ]
    assert tier_problems(items) == ["t.py::none: no tier", "t.py::two: unit, worker", "t.py::gpu_unit: unit and gpu"]


def test_every_collected_test_of_this_session_has_one_tier(request):
    assert tier_problems(request.session.items) == []


def test_a_unit_test_that_starts_a_process_fails():
    with pytest.raises(ProcessStarted, match="marked unit but started a process"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(ProcessStarted):
        multiprocessing.get_context("spawn").Process(target=print).start()
