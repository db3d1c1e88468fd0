"""The MCP ``verdict`` tool: the finished verdict of what is on disk now, through the MCP SDK's own
client, with a real ``ktui watch --headless`` (or ``ktui serve``) owning the workspace (CPU tier)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import anyio
import pytest
from conftest import child_env, make_workspace
from test_mcp import call, connect
from waits import SAFETY_S

from ktui.workspace.kernels import content_hash

pytestmark = pytest.mark.worker


def _owner(ws, *argv: str) -> subprocess.Popen:
    """``ktui watch --headless`` or ``ktui serve`` on ``ws``, once its owner's socket is there."""
    process = subprocess.Popen([sys.executable, "-m", "ktui", *argv, "--cpu"], cwd=ws, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=child_env(),
                               start_new_session=True)
    deadline = time.monotonic() + SAFETY_S
    while not (ws / ".ktui" / "owner" / "socket").exists():
        assert process.poll() is None and time.monotonic() < deadline, "the owner never served its socket"
        time.sleep(0.2)
    return process


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def test_verdict_waits_for_the_watchs_run_of_a_save_then_answers_again_at_once_from_history(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    watch = _owner(ws, "watch", "--headless")
    try:
        async def main():
            async with connect(ws) as session:
                kernel = ws / "kernels" / "add_triton.py"
                kernel.write_text(kernel.read_text() + "\n# saved by the agent\n")
                saved = content_hash(kernel.read_bytes())
                first = await call(session, "verdict", kernel="kernels/add_triton.py", timeout_s=300)
                assert first["status"] == "finished", first
                assert first["content_hash"] == saved and first["result"]["verdict"] == "passed", first
                again = await call(session, "verdict", kernel="add_triton", timeout_s=300)
                assert again["status"] == "finished" and again["result"] == first["result"], again
                assert again["waited_s"] < 1.0, again

        anyio.run(main)
    finally:
        _stop(watch)


def test_verdict_of_a_kernel_nobody_runs_says_so_at_once_and_names_run(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])

    async def ask() -> dict:
        async with connect(ws) as session:
            with anyio.fail_after(SAFETY_S):  # long before its timeout: it did not wait for a run
                return await call(session, "verdict", kernel="add_triton", timeout_s=600)

    alone = anyio.run(ask)
    assert alone["status"] == "not_run" and alone["result"] is None, alone
    assert "no ktui watch or ktui serve" in alone["message"] and "call run" in alone["message"], alone
    serve = _owner(ws, "serve")  # an owner that does not watch the files: nothing runs a save
    try:
        owned = anyio.run(ask)
    finally:
        _stop(serve)
    assert owned["status"] == "not_run" and "does not watch the files" in owned["message"], owned
    assert "call run with paths=['kernels/add_triton.py']" in owned["message"], owned
