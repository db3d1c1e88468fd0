"""The rungs pane draws the selected failed rung's error map: its line above a heatmap with
labelled axes, in the room the pane has; snapshots at 80×24 and 160×48.

The runs are real CPU-tier runs of the kernels with planted bugs (a missing tail mask, an
off-by-one row bound, a wrong stride), recorded by ``tests/fixtures/dashboard/record.py errormap``.
"""

from __future__ import annotations

import asyncio

import pytest
from dashboard_fixture import FIXTURES, replay_cpu_history
from textual.widgets import DataTable, Static

from ktui.protocol.errormap import ErrorMap
from ktui.tui.app import KtuiApp
from ktui.tui.heatmap import heatmap
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit

RECORDED = FIXTURES / "dashboard" / "errormap"
TAIL = "never written: cols 112–114 of every row (the last 3 columns)"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return replay_cpu_history(tmp_path_factory.mktemp("errormap") / "ws", RECORDED)


def make_app(recorded) -> KtuiApp:
    ws, now = recorded
    return KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)


def show(kernel: str):
    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app._select(kernel)
        await pilot.press("2")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_error_map_snapshot(snap_compare, recorded, size):
    assert snap_compare(make_app(recorded), terminal_size=size, run_before=show("tail_mask_missing"))


def test_error_map_of_nan_among_wrong_values_snapshot(snap_compare, recorded):
    assert snap_compare(make_app(recorded), terminal_size=(80, 24), run_before=show("row_bound_off_by_one"))


def test_the_map_of_the_failed_rung_is_drawn_whole_inside_80x24_and_goes_with_the_cursor(recorded):
    async def scenario():
        app = make_app(recorded)
        async with app.run_test(size=(80, 24)) as pilot:
            await show("tail_mask_missing")(pilot)
            drawn = app.query_one("#rung-map", Static)
            assert drawn.display and str(drawn.render()).splitlines()[0] == TAIL
            scroll = app.query_one("#rung-detail-scroll")
            assert scroll.region.bottom <= app.screen.region.bottom - 2  # above the status line and the keys
            assert drawn.region.height == len(str(drawn.render()).splitlines())  # not cut: every line shows
            assert scroll.max_scroll_y == 0 or drawn.region.bottom <= scroll.region.bottom
            table = app.query_one("#rungs-table", DataTable)
            table.move_cursor(row=0)  # pre-checks: ok, no map
            await pilot.pause()
            assert not drawn.display

    asyncio.run(scenario())


def test_the_heatmap_keeps_to_its_room_and_labels_both_axes():
    found = ErrorMap(description=TAIL, pattern="product", shape=[128, 115], rows=128, cols=115, slices=1,
                     cell_rows=5, cell_cols=2, grid=["." * 56 + "II"] * 26, mismatched=384, kinds={"unwritten": 384})
    for width, height in ((78, 7), (78, 12), (40, 6)):
        text = heatmap(found, width, height, {})
        lines = text.plain.splitlines()
        assert len(lines) <= height + 1  # the line may take a second when it is wider than the room
        assert all(len(line) <= width for line in lines[1:]), lines
        assert lines[1].lstrip().startswith("0 │") and lines[-3].lstrip().startswith("127 │")
        assert lines[-2].lstrip().startswith("└0") and lines[-2].endswith("114")
        assert "never written" in lines[-1] and "NaN" not in lines[-1]
