"""Several ``ktui run`` processes asking for one kernel at once, its file rewritten between the calls:
each caller gets a verdict of its own and exits by it (CPU tier, real processes)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import child_env, make_workspace, parse_events

pytestmark = pytest.mark.worker

CALLERS = 5


def test_concurrent_runs_of_one_kernel_rewritten_between_calls_each_end_with_a_verdict_and_its_exit_code(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["wrong_values"])
    kernel = ws / "kernels" / "wrong_values.py"
    source = kernel.read_text()
    argv = [sys.executable, "-m", "ktui", "run", "kernels/wrong_values.py", "--no-bench", "--no-audit", "--cpu",
            "--no-fresh-shapes", "--json"]

    def call() -> subprocess.Popen:
        return subprocess.Popen(argv, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env())

    first = call()
    socket = ws / ".ktui" / "owner" / "socket"
    deadline = time.monotonic() + 120
    while not socket.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket.exists(), "the first caller owns the workspace while it runs"
    callers = [first]
    for i in range(CALLERS):
        kernel.write_text(source + f"# variant {i}\n")  # every variant adds 1e-3 too much: each fails
        callers.append(call())
    try:
        answers = [(proc, *proc.communicate(timeout=600)) for proc in callers]
    finally:
        for proc in callers:
            proc.kill()
            proc.wait()
    for proc, out, err in answers:
        events = parse_events(out)
        ours = {e["run_id"] for e in events if e["type"] == "run_started" and e["kernel"] == "wrong_values"}
        verdicts = [e["verdict"] for e in events if e["type"] == "run_finished" and e["run_id"] in ours]
        assert verdicts and set(verdicts) == {"failed"}, f"pid {proc.pid} printed no verdict:\n{out}\n{err}"
        assert proc.returncode == 1, f"pid {proc.pid} exited {proc.returncode} for a failing kernel:\n{err}"
