"""``ktui serve`` owns a workspace: ``ktui run`` of that workspace runs on its warm worker (CPU tier)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from conftest import REPO, ktui, make_workspace, parse_events

from ktui.protocol.processes import descendants

pytestmark = pytest.mark.worker


def test_ktui_run_while_serve_owns_the_workspace_runs_on_its_one_warm_worker(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    serve = subprocess.Popen([sys.executable, "-m", "ktui", "serve", "--cpu"], cwd=ws, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert "owning" in serve.stdout.readline()
        workers = []
        for _ in range(2):
            proc = ktui("run", "kernels/add_triton.py", "--no-bench", "--no-audit", "--json", "--cpu", cwd=ws)
            assert proc.returncode == 0, proc.stderr
            events = parse_events(proc.stdout)
            assert [e["verdict"] for e in events if e["type"] == "run_finished"] == ["passed"]
            workers.append(descendants(serve.pid))
        assert workers[0] and workers[0] == workers[1], "both runs used the owner's one warm worker"
        refused = ktui("run", "kernels/add_triton.py", "--no-bench", "--no-audit", "--cold", cwd=ws)
        assert refused.returncode == 2 and "runs on this machine (CPU tier), not" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
    assert not (ws / ".ktui" / "owner" / "socket").exists()


def test_two_ktui_runs_at_once_take_turns_on_the_first_ones_worker_each_printing_its_own(tmp_path):
    import time

    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir

    ws = make_workspace(tmp_path / "ws", ["add_triton", "softmax_triton"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "ktui", "run", "--no-bench", "--no-audit", "--cpu", "--json"]
    first = subprocess.Popen([*argv, "kernels/softmax_triton.py"], cwd=ws, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    socket = ws / ".ktui" / "owner" / "socket"
    deadline = time.monotonic() + 60
    while not socket.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket.exists(), "the first ktui run owns the workspace while it runs"
    second = ktui("run", "--no-bench", "--no-audit", "--cpu", "--json", "kernels/add_triton.py", cwd=ws)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, err + second.stderr
    assert [e["kernel"] for e in parse_events(second.stdout) if e["type"] == "run_started"] == ["add_triton"]
    # The first owned the workspace: it ran the second's kernel to its end, and printed its own alone.
    assert [e["kernel"] for e in parse_events(out) if e["type"] == "run_started"] == ["softmax_triton"], out
    store = Store.of(state_dir(ws))
    try:
        runs = sorted(store.runs(), key=lambda r: r.started)
    finally:
        store.close()
    assert [r.verdict for r in runs] == ["passed", "passed"]
    assert runs[0].finished <= runs[1].started, "the two runs overlapped"
