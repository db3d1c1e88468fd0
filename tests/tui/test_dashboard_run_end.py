"""The dashboard sees every run end: after the scheduler's last notice its queue is empty and the
verdict is on screen — with one worker, and with one worker per GPU (two ``--gpus`` entries with a
CPU-tier worker behind each stand for two GPUs: this machine has none) — and a stale queue notice
that arrives late does not undo it.

Real workspace, real watch loop, real worker processes, driven with Textual's Pilot.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from conftest import make_workspace
from test_dashboard import idle, plain, row, until

from ktui.dispatch.gpus import Device
from ktui.dispatch.pool import DevicePool
from ktui.dispatch.runner import WorkerConfig
from ktui.protocol.job import Options
from ktui.protocol.notices import QueueChanged
from ktui.tui.app import KtuiApp
from ktui.tui.state import DashboardState, KernelView
from ktui.watch.loop import WatchSettings
from ktui.workspace.folder import Workspace


def _app(ws, runners=None) -> KtuiApp:
    return KtuiApp(Workspace.at(ws), Options(seed=0, benchmark=False, force_cpu=True, timeouts={"compile": 120}),
                   WatchSettings(debounce_s=0.05, audit=False), runners=runners)


async def _until_every_run_ended(app: KtuiApp, pilot, kernels: list[str]) -> None:
    """Wait for each kernel's first verdict, failing at once if the dashboard stopped (a handler
    raised) instead of waiting out the timeout."""

    def ended() -> bool:
        if app.return_code is not None or not app.is_running:
            raise AssertionError(f"the dashboard stopped (exit code {app.return_code}) before the runs ended")
        return all(app.state.kernels[k].verdict for k in kernels) and idle(app)

    await until(pilot, ended, timeout=300, what=f"the runs of {kernels} to end")


@pytest.mark.worker
def test_after_a_runs_last_notice_the_dashboard_queue_is_empty_and_its_verdict_is_on_screen(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    async def scenario():
        app = _app(ws)
        async with app.run_test(size=(160, 48)) as pilot:
            await _until_every_run_ended(app, pilot, ["add_triton"])
            assert app.state.queue.running is None and not app.state.queue.also_running
            view = app.state.kernels["add_triton"]
            assert (view.state, view.verdict, view.version) == ("passed", "passed", 1), view.message
            await pilot.pause(0.3)
            assert row(app, "add_triton")[0] == "✓ passed"
            assert "add_triton v1 passed" in plain(app.query_one("#rungs-head"))
            assert "CPU · Triton interpreter" in plain(app.query_one("#status"), width=300)

    asyncio.run(scenario())


@pytest.mark.worker
def test_with_two_gpus_the_dashboard_sees_both_runs_end_and_names_the_gpus(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "kernels" / "add_copy.py").write_text((ws / "kernels" / "add_triton.py").read_text())
    kernels = ["add_copy", "add_triton"]

    async def scenario():
        pool = DevicePool([Device("0"), Device("1")], WorkerConfig(force_cpu=True))
        app = _app(ws, runners=pool.runners)
        async with app.run_test(size=(160, 48)) as pilot:
            await _until_every_run_ended(app, pilot, kernels)
            assert app.state.queue.running is None and not app.state.queue.also_running
            for kernel in kernels:
                view = app.state.kernels[kernel]
                assert (view.state, view.verdict) == ("passed", "passed"), view.message
                assert row(app, kernel)[0] == "✓ passed"
            assert "GPUs 0,1" in plain(app.query_one("#status"), width=300)

    asyncio.run(scenario())


@pytest.mark.unit
def test_a_queue_notice_taken_before_the_last_one_but_delivered_after_it_does_not_bring_back_a_finished_run():
    # Two GPUs' threads finish at once: each takes a snapshot, and the older may reach the
    # dashboard last (Textual also puts a message posted on its own thread ahead of ones other
    # threads scheduled earlier).
    state = DashboardState(Path("/ws"))
    for name in ("a", "b"):
        state.kernels[name] = KernelView(id=name, path=f"/ws/kernels/{name}.py", reference="", verdict="passed")
    state.apply(QueueChanged(running="a", also_running=("b",), seq=1))
    state.apply(QueueChanged(running=None, seq=3))  # b's thread: nothing runs any more
    assert state.apply(QueueChanged(running="b", seq=2)) == set()  # a's thread, late: b still ran then
    assert state.queue.running is None and [v.state for v in state.kernels.values()] == ["passed", "passed"]
