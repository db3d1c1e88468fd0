"""``ktui run --gpus``: kernels judged in parallel, one worker per GPU, printed as they finish.

``--cpu --gpus 0,1`` puts a CPU-tier worker behind each of two GPU entries (this machine has no
GPU): the same scheduling, real worker processes and kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from conftest import REPO, by_kernel, finished, ktui, make_workspace, parse_events

pytestmark = pytest.mark.worker


def test_ktui_run_on_two_gpus_prints_the_run_that_finishes_first_first_each_with_its_gpu(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["held"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    # held.py waits until kernels/release exists: it is let go only once add_triton's verdict is printed,
    # so add_triton ran beside it, on the other GPU, while it was surely in flight.
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--no-audit", "--json", "--cpu", "--gpus", "0,1",
                             "--no-bench", "kernels/held.py", "kernels/add_triton.py"],
                            cwd=ws, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    watchdog = threading.Timer(180, proc.kill)  # a verdict that never comes ends the test, not the suite
    watchdog.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            event = json.loads(line)
            if event["type"] == "run_finished":
                (ws / "kernels" / "release").touch()
        stderr = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
    events = parse_events("".join(lines))
    runs = by_kernel(events)
    ids = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    order = [ids[e["run_id"]] for e in events if e["type"] == "run_finished"]
    assert order == ["add_triton", "held"], stderr  # held was handed out first, and ends last
    assert finished(runs["add_triton"])["verdict"] == "passed"
    assert finished(runs["held"])["verdict"] == "passed"
    gpus = {kernel: runs[kernel][0]["gpu"] for kernel in runs}
    assert sorted(gpus.values()) == ["0", "1"]
    assert finished(runs["add_triton"])["summary"]["ran_on"]["gpu"] == gpus["add_triton"]
    assert proc.returncode == 0


def test_ktui_run_with_the_cpu_tier_and_no_gpus_keeps_one_worker(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--json", "--cpu", "--no-bench", "kernels/add_triton.py", cwd=ws, timeout=300)
    events = parse_events(proc.stdout)
    assert [e["gpu"] for e in events if e["type"] == "run_started"] == [""]
    assert "ran_on" not in finished(events)["summary"] and proc.returncode == 0
