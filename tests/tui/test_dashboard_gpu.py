"""The dashboard on a GPU: speedups in the list and the history, ``p`` fills the ncu pane.

    python3 -m pytest -m gpu tests/tui/test_dashboard_gpu.py
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import make_workspace
from test_dashboard import idle, plain, row, until

from ktui.protocol.job import Options
from ktui.tui.app import KtuiApp
from ktui.watch.loop import WatchSettings
from ktui.workspace.folder import Workspace

pytestmark = [pytest.mark.gpu, pytest.mark.worker]


def test_on_a_gpu_the_list_and_history_show_speedups_and_p_fills_the_ncu_pane(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_triton"])

    async def scenario():
        app = KtuiApp(Workspace.at(ws), Options(seed=0), WatchSettings(debounce_s=0.05, audit=False))
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: idle(app) and app.state.kernels["softmax_triton"].verdict, timeout=600,
                        what="the first run")
            view = app.state.kernels["softmax_triton"]
            assert view.tier == "gpu" and view.verdict == "passed", view.message
            assert view.last_speedup is not None and row(app, "softmax_triton")[3].endswith("x")
            assert f"{view.device} · {view.arch}" in plain(app.query_one("#status"), width=300)
            assert app.query_one("#history-plot").display  # a chart, not the CPU sentence
            await pilot.press("p")
            await until(pilot, lambda: (s := app.state.profiles.get("softmax_triton")) is not None and not s.running,
                        timeout=900, what="the ncu profile")
            status = app.state.profiles["softmax_triton"]
            assert status.ok, status.message
            await pilot.pause(0.3)
            head = plain(app.query_one("#ncu-head"), width=300)
            assert "ncu --set basic · v1" in head and "STALE" not in head

    asyncio.run(scenario())
