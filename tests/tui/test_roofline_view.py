"""The history pane's roofline view (``o``): each benchmark shape of the selected kernel's versions on
the GPU's roofline, from figures an NVIDIA H200 recorded (tests/fixtures/gpu/roofline: how they
were made is in its make_history.py; nothing here ran on a GPU); snapshots at 80×24 and 160×48."""

from __future__ import annotations

import asyncio

import pytest
from conftest import make_workspace
from h200_history import replay_h200_history
from textual.widgets import Static

from ktui.protocol.statedir import calibration_file
from ktui.tui.app import KtuiApp
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return replay_h200_history(tmp_path_factory.mktemp("roofline") / "ws")


def make_app(workspace, now: float) -> KtuiApp:
    return KtuiApp(Workspace.at(workspace), live=False, clock=lambda: now)


def roofline_of(kernel: str):
    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app._select(kernel)
        await pilot.press("o")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize(("size", "kernel"), [((80, 24), "rmsnorm_triton"), ((160, 48), "rmsnorm_triton"),
                                              ((160, 48), "gemm_bf16_triton")],
                         ids=["80x24-rmsnorm", "160x48-rmsnorm", "160x48-gemm"])
def test_roofline_snapshot(snap_compare, recorded, size, kernel):
    ws, now = recorded
    assert snap_compare(make_app(ws, now), terminal_size=size, run_before=roofline_of(kernel))


def head_after(app: KtuiApp, keys: list[str], kernel: str, size=(100, 40)) -> list[str]:
    heads: list[str] = []

    async def scenario():
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            app._select(kernel)
            for key in keys:
                await pilot.press(key)
                await pilot.pause(0.1)
                heads.append(str(app.query_one("#history-head", Static).render()))

    asyncio.run(scenario())
    return heads


def test_o_shows_the_roofline_with_the_calibrated_roofs_and_o_again_the_speedup(recorded):
    ws, now = recorded
    on, off = head_after(make_app(ws, now), ["o", "o"], "gemm_bf16_triton")
    assert on.startswith("roofline · NVIDIA H200 · calibrated 2026-12-02 · o: speedup")
    assert "bf16 769.1 TFLOP/s" in on and "launch floor 3.46 µs" in on and "best v3" in on
    assert "under 90% of it (stop)" in on
    assert off.startswith("• speedup per version") and "o: the shapes on the roofline" in off


def test_without_a_calibration_the_datasheet_roofs_are_drawn_and_called_provisional(recorded, tmp_path):
    ws, now = recorded
    saved = calibration_file(ws).read_bytes()
    calibration_file(ws).unlink()
    try:
        (on,) = head_after(make_app(ws, now), ["o"], "add_triton")
    finally:
        calibration_file(ws).write_bytes(saved)
    assert "datasheet NVIDIA H200 SXM 141GB, provisional: not calibrated here" in on
    assert "no launch floor (not calibrated)" in on


def test_a_kernel_never_timed_says_so_instead_of_an_empty_chart(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (on,) = head_after(make_app(ws, 0.0), ["o"], "add_triton")
    assert on.startswith("roofline: no version was timed")
