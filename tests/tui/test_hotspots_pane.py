"""The SASS pane's hot-lines mode (``h``): the selected version's source with a gutter of per-line
figures, the hottest lines highlighted; snapshots at 80×24 and 160×48.

The version shown is softmax_triton v3 of the dashboard fixture given the build profiled on an H200
(tests/fixtures/hotspots/h200: the shipped softmax, whose lines are those of v3, only line 23's
text differs): its ``source.py``, the ``hotspots.json`` of its recorded SASS and PTX, and the
``hotspots_measured.json`` of its recorded Nsight Compute source page, both made here from the
recordings as the dumps rung and ``ktui profile`` make them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dashboard_fixture import add_synthetic_gpu_history, replay_cpu_history

from ktui.measure import hotspots
from ktui.profiling.ncu import source as ncu_source
from ktui.tui.app import KtuiApp
from ktui.tui.panes.hotspots import hot_renderables, hot_view
from ktui.tui.panes.sass_diff import SassPane
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit

H200 = Path(__file__).parent.parent / "fixtures" / "hotspots" / "h200"
NAME = "softmax_triton.py"


def _write_static(folder: Path) -> None:
    (folder / "source.py").write_text((H200 / "softmax_triton_source.py").read_text())
    listing = (H200 / "softmax_triton.sass").read_text()
    ptx = (H200 / "softmax_triton.ptx").read_text()
    hotspots.write(folder, hotspots.to_json(hotspots.attribute(listing, NAME, (folder / "source.py").read_text(), ptx), NAME))


def _write_measured(folder: Path) -> dict:
    page = ncu_source.parse_source_page((H200 / "softmax_triton_source.csv").read_text())
    static = hotspots.attribute_offsets((H200 / "softmax_triton.sass").read_text(), (H200 / "softmax_triton.ptx").read_text())
    measured = ncu_source.aggregate(page, static, NAME, (folder / "source.py").read_text())
    (folder / hotspots.MEASURED_FILE).write_text(json.dumps(measured))
    return measured


def _line_of(needle: str) -> int:
    return next(i for i, line in enumerate((H200 / "softmax_triton_source.py").read_text().splitlines(), 1) if needle in line)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    ws, now = replay_cpu_history(tmp_path_factory.mktemp("hot") / "ws")
    add_synthetic_gpu_history(ws, now)
    folder = ws / ".ktui" / "runs" / "softmax_triton" / "3"
    _write_static(folder)
    _write_measured(folder)
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
            # by samples: the store, draining at exit, is the hottest of the kernel's own lines
            assert pane.hot_lines[:2] == [_line_of("tl.store("), _line_of("num = tl.exp(x)")]
            await pilot.press("h")
            await app.workers.wait_for_complete()
            assert not pane.hot_mode and pane.border_title == "4 sass diff"

    import anyio
    anyio.run(main)


def test_without_a_profile_the_lines_with_most_instructions_are_hot(tmp_path):
    _write_static(tmp_path)
    view = hot_view(tmp_path)
    assert view["measured"] == {} and view["hot"][0] == _line_of("num = tl.exp(x)")  # exp: the most instructions
    head, _body, hot = hot_renderables(tmp_path, 3)
    assert "by SASS instructions (static" in head.plain and hot == view["hot"]


def test_measured_samples_decide_the_hot_lines_and_carry_their_reading(tmp_path):
    _write_static(tmp_path)
    measured = _write_measured(tmp_path)
    (kernel,) = measured["kernels"]
    order = [x["line"] for x in kernel["hot_lines"]]
    assert hot_view(tmp_path)["hot"] == order[: len(hot_view(tmp_path)["hot"])] and len(order) > 2
    head, body, hot = hot_renderables(tmp_path, 3)
    assert hot[0] == _line_of("tl.store(") and "by samples (ncu)" in head.plain
    rows = {r.plain.split()[0]: r.plain for r in body.renderables[1:]}
    store = kernel["hot_lines"][0]
    assert f"{store['share']:.0%}" in rows[str(hot[0])] and "← draining stores at exit" in rows[str(hot[0])]
    load = rows[str(_line_of("x = tl.load("))]
    assert "←" in load and load.split()[2] != "·"  # its global loads in the gutter, and a reading
    # Most samples are on Triton's inlined reductions, on none of the kernel's lines: told below the source.
    (library,) = kernel["elsewhere"]
    last = body.renderables[-1].plain
    assert "[Triton library (standard.py)]" in last and f"{library['share']:.0%}" in last
    assert "← waiting on global memory" in last and library["share"] > store["share"]


def test_a_version_without_hot_spots_says_so(tmp_path):
    _head, body, hot = hot_renderables(tmp_path, 2)
    assert hot == [] and "no hot spots for this version" in body.plain
