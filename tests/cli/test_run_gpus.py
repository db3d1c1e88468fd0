"""``ktui run --gpus``: kernels judged in parallel, one worker per GPU, printed as they finish.

``--cpu --gpus 0,1`` puts a CPU-tier worker behind each of two GPU entries (this machine has no
GPU): the same scheduling, real worker processes and kernels.
"""

from __future__ import annotations

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events

pytestmark = pytest.mark.worker


def test_ktui_run_on_two_gpus_prints_the_run_that_finishes_first_first_each_with_its_gpu(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang"])
    proc = ktui("run", "--no-audit", "--json", "--cpu", "--gpus", "0,1", "--no-bench", "--timeout", "compile=45",
                "kernels/hang.py", "kernels/add_triton.py", cwd=ws, timeout=400)
    events = parse_events(proc.stdout)
    runs = by_kernel(events)
    ids = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    order = [ids[e["run_id"]] for e in events if e["type"] == "run_finished"]
    assert order == ["add_triton", "hang"], proc.stderr  # the hang was handed out first, and ends last
    assert finished(runs["add_triton"])["verdict"] == "passed"
    assert finished(runs["hang"])["verdict"] == "timed_out"
    gpus = {kernel: runs[kernel][0]["gpu"] for kernel in runs}
    assert sorted(gpus.values()) == ["0", "1"]
    assert finished(runs["add_triton"])["summary"]["ran_on"]["gpu"] == gpus["add_triton"]
    assert proc.returncode == 1


def test_ktui_run_with_the_cpu_tier_and_no_gpus_keeps_one_worker(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--json", "--cpu", "--no-bench", "kernels/add_triton.py", cwd=ws, timeout=300)
    events = parse_events(proc.stdout)
    assert [e["gpu"] for e in events if e["type"] == "run_started"] == [""]
    assert "ran_on" not in finished(events)["summary"] and proc.returncode == 0
