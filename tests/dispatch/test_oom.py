"""A worker the out-of-memory killer ends is said to be, not only "killed by SIGKILL": from the
kernel log where it is readable, else from its memory cgroup's ``oom_kill`` count."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import child_env, finished, make_workspace, parse_events

from ktui.dispatch.oom import OomWatch

SMALL = """
import torch

TESTS = [{"size": 8}]
BENCHMARKS = [{"size": 8}]


def generate_input(seed: int, size: int):
    return (torch.randn(size, generator=torch.Generator().manual_seed(seed)),)


def ref_kernel(x):
    return x * 2
"""

GREEDY = """
import torch
import triton

REFERENCE = "small"


@triton.jit
def nothing(x_ptr):
    pass


def custom_kernel(x):
    hoard = torch.ones(1_000_000_000)  # 4 GB, far past its cgroup's limit
    return x * 2 + hoard[0] - 1
"""


@pytest.mark.worker
def test_a_worker_killed_by_the_oom_killer_says_so(tmp_path):
    from cgroups import limited

    ws = make_workspace(tmp_path / "ws")
    (ws / "references" / "small.py").write_text(SMALL)
    (ws / "kernels" / "small_greedy.py").write_text(GREEDY)
    with limited(1_500_000_000) as (cgroup, inside):
        proc = subprocess.run([*inside, sys.executable, "-m", "ktui", "run", "--no-audit", "--json", "--no-bench",
                               "--cpu", "--seed", "1", "kernels/small_greedy.py"], cwd=ws, capture_output=True,
                              text=True, env=child_env(), timeout=600)
        kills = cgroup.oom_kills()
    end = finished(parse_events(proc.stdout))
    assert end["verdict"] == "crashed", proc.stdout[-3000:] + proc.stderr[-3000:]
    assert kills and kills >= 1
    first = end["message"].splitlines()[0]
    assert first.startswith("the worker died in compile (killed by SIGKILL): ") and "by the out-of-memory killer" in first


@pytest.mark.unit
def test_without_the_kernel_log_a_rise_of_the_cgroups_oom_kill_count_during_the_job_is_the_evidence(tmp_path, monkeypatch):
    import ktui.dispatch.oom as oom
    from ktui.protocol.cgroups import MemoryCgroup

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "memory.events").write_text("oom 0\noom_kill 3\n")
    (folder / "memory.max").write_text(str(2 * 10**9))
    monkeypatch.setattr(oom, "KMSG", str(tmp_path / "no kernel log here"))
    watch = OomWatch(pid=1, started_us=0, cgroup=MemoryCgroup(2, (folder,)))
    watch.job_started()
    assert watch.evidence() == ""  # its count did not move: another cause
    (folder / "memory.events").write_text("oom 1\noom_kill 4\n")
    assert watch.evidence() == ("most likely by the out-of-memory killer: its memory cgroup (2.00 GB limit) counted 1 "
                                f"OOM kill(s) during the run, {folder}")
    assert OomWatch(pid=1, started_us=0, cgroup=None).evidence() == ""


