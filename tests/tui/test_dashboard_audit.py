"""``weak test`` in the dashboard: the watch loop audits the reference in the background and the
status line and the rungs pane say so (Pilot, real worker and audit processes, CPU tier)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES
from test_dashboard import idle, make_app, plain, until
from textual.widgets import DataTable, Static

from ktui.tui.panes.rungs import RungsPane

pytestmark = pytest.mark.worker


def relu_workspace(root: Path, reference: str = "relu_rand") -> Path:
    """``references/<reference>.py`` (ReLU on rand: weak; on randn: strong) and a copy kernel judged by it."""
    (root / "references").mkdir(parents=True)
    (root / "kernels").mkdir()
    shutil.copy(FIXTURES / "audit" / f"{reference}.py", root / "references" / f"{reference}.py")
    copy = (FIXTURES / "audit" / "relu_copy_triton.py").read_text()
    (root / "kernels" / "relu_copy_triton.py").write_text(copy.replace('REFERENCE = "relu_rand"',
                                                                       f'REFERENCE = "{reference}"'))
    return root


def rung_rows(app) -> dict[str, str]:
    table = app.query_one("#rungs-table", DataTable)
    return {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)}


def test_a_weak_reference_shows_weak_test_in_the_status_line_and_the_rungs_pane_with_the_reason_on_enter(tmp_path):
    ws = relu_workspace(tmp_path / "ws")

    async def scenario():
        app = make_app(ws, audit=True)
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.state.kernels["relu_copy_triton"].verdict == "passed", what="the run")
            assert "weak test" not in plain(app.query_one("#status", Static), width=200)  # not audited yet
            assert app.state.kernels["relu_copy_triton"].summary["trusted"] == "pending"
            await until(pilot, lambda: app.state.audits, timeout=180, what="the background audit")
            assert app.state.kernels["relu_copy_triton"].summary["trusted"] is False  # the audit settled it
            await until(pilot, lambda: "weak test: a kernel that returns a copy of input 0 passes on every test shape"
                        in plain(app.query_one("#status", Static), width=200), what="the status line")
            await until(pilot, lambda: rung_rows(app).get("audit") == "! weak test", what="the rungs pane")
            assert idle(app) and app.state.queue.background is None
            await pilot.press("2")
            table = app.query_one("#rungs-table", DataTable)
            table.move_cursor(row=table.row_count - 1)
            await pilot.pause()
            assert "enter: show why" in plain(app.query_one("#rung-detail", Static))
            await pilot.press("enter")
            assert app.query_one(RungsPane).expanded
            assert "input 0 is never negative" in plain(app.query_one("#rung-detail", Static), width=400)

    asyncio.run(scenario())


def test_a_strong_reference_shows_no_weak_test(tmp_path):
    ws = relu_workspace(tmp_path / "ws", reference="relu_randn")

    async def scenario():
        app = make_app(ws, audit=True)
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.state.audits, timeout=240, what="the background audit")
            [audit] = app.state.audits.values()
            assert audit.verdict == "strong"
            await pilot.pause()
            assert "weak test" not in plain(app.query_one("#status", Static), width=200)
            assert "audit" not in rung_rows(app) and app.state.kernels["relu_copy_triton"].weak_test == ()

    asyncio.run(scenario())
