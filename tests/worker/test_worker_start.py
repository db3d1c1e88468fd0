"""The worker says where its start went: ``start_s`` in its ready message, phase by phase (read the
way ``tests/benchmarks/worker_start.py`` reads it)."""

from __future__ import annotations

import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.worker


def test_the_ready_message_splits_the_start_into_its_phases_within_the_wall_time():
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    from worker_start import one_start

    wall, phases = one_start(cpu=True)
    assert list(phases) == ["confine", "torch", "dsls", "rung modules", "cuda init", "harness snapshot"]
    assert all(seconds >= 0 for seconds in phases.values())
    assert phases["torch"] > 0.05 and phases["cuda init"] < 0.05  # torch is imported here; the CPU tier starts no CUDA
    assert sum(phases.values()) <= wall
