"""Reliability on the GPU tier: a ``ktui run`` stopped by a signal mid-kernel, and a hostile file
name printed by a run with its benchmark rungs. Run on a CUDA machine with ``python -m pytest -m gpu``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import REPO, ktui, make_workspace

from ktui.history.store import Store

pytestmark = [pytest.mark.gpu, pytest.mark.worker]


@pytest.fixture(autouse=True)
def _needs_a_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


def test_a_gpu_run_stopped_by_sigterm_is_recorded_cancelled_and_leaves_no_worker(tmp_path):
    from test_run_cli import processes_with

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang"])
    marker = f"KTUI_GPU_SIGNAL_TEST={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--no-audit", "kernels/hang.py", "kernels/add_triton.py"],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), name: value})
    try:
        for line in proc.stdout:
            if line.startswith("== hang"):
                break
        time.sleep(5.0)  # hang spins on the host after its first launch
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    store = Store.of(ws / ".ktui")
    try:
        runs = [(r.kernel, r.verdict, r.message) for r in store.runs()]
    finally:
        store.close()
    assert runs == [("hang", "cancelled", "cancelled: stopped by SIGTERM")]
    deadline = time.monotonic() + 10
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == []


def test_a_hostile_file_name_is_shown_not_obeyed_by_a_gpu_run_with_its_benchmark(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    hostile = "add_\x1b]2;HIJACKED\x07\x1b[2J.py"
    (ws / "kernels" / hostile).write_text((REPO / "kernels" / "add_triton.py").read_text())
    proc = ktui("run", "--no-audit", f"kernels/{hostile}", "--bench-time", "1", cwd=ws, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr
    assert "add_\\x1b]2;HIJACKED\\x07\\x1b[2J v1 passed" in proc.stdout
    assert "[benchmark[" in proc.stdout
