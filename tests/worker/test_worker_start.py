"""The worker says where its start went: ``start_s`` in its ready message, phase by phase."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import REPO

pytestmark = pytest.mark.worker


def test_the_ready_message_splits_the_start_into_its_phases_within_the_wall_time():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ktui.worker.main", "--cpu"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        ready = json.loads(proc.stdout.readline())
        wall = time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()
    phases = ready["start_s"]
    assert list(phases) == ["confine", "torch", "dsls", "rung modules", "cuda init", "fake tensors", "harness snapshot"]
    assert all(seconds >= 0 for seconds in phases.values())
    assert phases["torch"] > 0.05 and phases["cuda init"] < 0.05  # torch is imported here; the CPU tier starts no CUDA
    assert sum(phases.values()) <= wall
