"""The SASS pane's hot-lines mode (``h``): the selected version's source with a gutter of per-line
figures, the hottest lines highlighted; snapshots at 80×24 and 160×48.

The version shown is the recorded softmax_triton v3 of the dashboard fixture, given the
``hotspots.json`` its dumps rung writes today: the real CPU-tier SASS of tests/fixtures/hotspots
(the shipped softmax, whose lines are those of v3: only line 23's text differs) attributed with
v3's own source text.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dashboard_fixture import add_synthetic_gpu_history, replay_cpu_history

from ktui.measure import hotspots
from ktui.tui.app import KtuiApp
from ktui.tui.panes.hotspots import hot_renderables, hot_view
from ktui.tui.panes.sass_diff import SassPane
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hotspots"


def _write_static(folder: Path) -> None:
    source = (folder / "source.py").read_text()
    listing = (FIXTURES / "softmax_triton.sass").read_text()
    ptx = (FIXTURES / "softmax_triton.ptx").read_text()
    data = hotspots.to_json(hotspots.attribute(listing, "softmax_triton.py", source, ptx), "softmax_triton.py")
    hotspots.write(folder, data)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    ws, now = replay_cpu_history(tmp_path_factory.mktemp("hot") / "ws")
    add_synthetic_gpu_history(ws, now)
    _write_static(ws / ".ktui" / "runs" / "softmax_triton" / "3")
    return ws, now


def make_app(recorded) -> KtuiApp:
    ws, now = recorded
    return KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)


def show_hot(kernel: str):
    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app._select(kernel)
        await pilot.press("h")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_hot_lines_snapshot(snap_compare, recorded, size):
    assert snap_compare(make_app(recorded), terminal_size=size, run_before=show_hot("softmax_triton"))


def test_h_switches_to_the_hot_lines_of_the_selected_version_and_back(recorded):
    async def main():
        app = make_app(recorded)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause()
            app._select("softmax_triton")
            await pilot.press("h")
            await app.workers.wait_for_complete()
            await pilot.pause(0.1)
            pane = app.query_one(SassPane)
            assert pane.hot_mode and pane.border_title == "4 hot lines"
            source = (recorded[0] / ".ktui" / "runs" / "softmax_triton" / "3" / "source.py").read_text().splitlines()
            assert "tl.exp(" in source[pane.hot_lines[0] - 1]  # the exp line compiled to the most instructions
            await pilot.press("h")
            await app.workers.wait_for_complete()
            assert not pane.hot_mode and pane.border_title == "4 sass diff"

    import anyio
    anyio.run(main)


def test_measured_samples_decide_the_hot_lines_and_carry_their_reading(tmp_path):
    folder = tmp_path / "3"
    folder.mkdir()
    (folder / "source.py").write_text((FIXTURES / "softmax_triton.py").read_text())
    _write_static(folder)
    measured = {"kernels": [{"hot_lines": [{"line": 20, "share": 0.7, "reading": "waiting on global memory"},
                                           {"line": 24, "share": 0.2, "reading": "draining stores at exit"}]}]}
    (folder / hotspots.MEASURED_FILE).write_text(json.dumps(measured))
    assert hot_view(folder)["hot"] == [20, 24]
    head, body, hot = hot_renderables(folder, 3)
    assert hot == [20, 24] and "by samples (ncu)" in head.plain
    rows = {r.plain.split()[0]: r.plain for r in body.renderables[1:]}
    assert "70%" in rows["20"] and "← waiting on global memory" in rows["20"]


def test_a_version_without_hot_spots_says_so(tmp_path):
    _head, body, hot = hot_renderables(tmp_path, 2)
    assert hot == [] and "no hot spots for this version" in body.plain
