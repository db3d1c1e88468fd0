"""The MCP server's runs: one warm worker across calls, or the workspace owner's (CPU tier)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid

import anyio
import pytest
from conftest import child_env, make_workspace
from test_mcp import call, connect, tagged_processes
from waits import SAFETY_S, until

from ktui.protocol.processes import descendants

pytestmark = pytest.mark.worker


def _two_runs(ws, tag: str, expected: int) -> list[list[int]]:
    """The verdicts of two run calls, and the server's processes after each once they are
    ``expected`` many: the first call's audit of the reference runs in a process of its own, in the
    background of the server's queue or the owner's, after the answer (waited for, with a safety limit)."""
    seen: list[list[int]] = []

    async def main():
        async with connect(ws, tag=tag) as session:
            for seed in (1, 2):
                result = await call(session, "run", paths=["kernels/add_triton.py"], seed=seed, no_bench=True)
                assert result["all_passed"] is True
                deadline = time.monotonic() + SAFETY_S
                while len(tagged_processes(tag)) != expected and time.monotonic() < deadline:
                    await anyio.sleep(0.1)
                seen.append(sorted(tagged_processes(tag)))

    anyio.run(main)
    return seen


def _warm_workers(pid: int, wait_s: float = SAFETY_S) -> list[int]:
    """The owner's processes once its worker has started: it warms one from the start, on a thread
    that may still be spawning it when the owner says it owns the workspace."""
    deadline = time.monotonic() + wait_s
    while not (found := descendants(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found, f"ktui serve started no warm worker within {wait_s:.0f} s"
    return found


def test_the_mcp_server_keeps_its_warm_worker_from_one_run_call_to_the_next(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    first, second = _two_runs(ws, uuid.uuid4().hex, expected=2)
    assert len(first) == 2 and first == second, "the same server and worker processes for both calls"


def test_the_mcp_server_runs_on_the_owners_worker_while_another_process_owns_the_workspace(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    serve = subprocess.Popen([sys.executable, "-m", "ktui", "serve", "--cpu"], cwd=ws,
                             env=child_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert "owning" in serve.stdout.readline()
        workers = _warm_workers(serve.pid)
        first, second = _two_runs(ws, uuid.uuid4().hex, expected=1)
        assert len(first) == 1 and first == second, "the MCP server started no worker of its own"
        # the owner's own: its worker, and, for a while, the reference's audit the first call handed it
        assert until(lambda: descendants(serve.pid) == workers), descendants(serve.pid)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)


def test_the_mcp_server_started_with_gpus_runs_on_those_gpus_in_parallel(tmp_path):
    import json

    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir

    ws = make_workspace(tmp_path / "ws", ["add_triton", "softmax_triton"])
    command = [sys.executable, "-m", "ktui", "mcp", str(ws), "--cpu", "--gpus", "0,1"]

    async def main():
        async with connect(ws, command=command) as session:
            result = await call(session, "run", paths=["kernels/"], seed=1, no_bench=True)
            assert result["all_passed"] is True, json.dumps(result)[:2000]

    anyio.run(main)
    store = Store.of(state_dir(ws))
    try:
        gpus = {run.kernel: run.gpu for run in store.runs()}
    finally:
        store.close()
    assert sorted(gpus.values()) == ["0", "1"], gpus
