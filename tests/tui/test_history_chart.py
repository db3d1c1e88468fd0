"""The history pane where nothing is timed (the CPU tier): each version's compiled code, charted
from the dumps rung's SASS facts in the history, readable at 80×24."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from dashboard_fixture import replay_cpu_history
from textual_plotext import PlotextPlot

from ktui.history.store import Store
from ktui.protocol.events import RunFinished, RunStarted
from ktui.tui.app import KtuiApp
from ktui.tui.panes.history import _head
from ktui.tui.state import KernelView
from ktui.tui.versions import version_history
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit


def screen_lines(app: KtuiApp) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def history_of(app: KtuiApp, pilot, kernel: str) -> list[str]:
    await pilot.pause()
    app._select(kernel)
    await pilot.press("3")
    await pilot.pause(0.3)
    return screen_lines(app)


def test_on_the_cpu_tier_the_history_charts_instructions_and_registers_per_version_at_80x24(tmp_path):
    ws, now = replay_cpu_history(tmp_path / "ws")

    async def scenario():
        app = KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)
        async with app.run_test(size=(80, 24)) as pilot:
            lines = await history_of(app, pilot, "softmax_triton")
            text = "\n".join(lines)
            assert app.query_one("#history-plot", PlotextPlot).display
            assert "nothing is timed on the CPU tier" in text and "instructions (left)" in text
            assert "registers (right)" in text and "no spills" in text
            # The recorded SASS: 25, 25, 30 instructions (v1, v2, v3), 12 registers each; the axes'
            # ticks are those whole values, never a fraction of an instruction.
            left = {t for line in lines for t in re.findall(r"(?:^|\s)(\d+(?:\.\d+)?)┤", line)}
            right = {t for line in lines for t in re.findall(r"├(\d+(?:\.\d+)?)", line)}
            assert (left, right) == ({"25", "30"}, {"12"})
            x_labels = lines[next(i for i, line in enumerate(lines) if "└" in line and "┬" in line) + 1]
            assert x_labels.split() == ["v1", "v2", "v3"]  # whole labels, none cut or merged
            plot_rows = [line for line in lines if "┤" in line or "│" in line]
            marks = "".join(plot_rows)
            assert marks.count("◆") == 3 and marks.count("•") == 2 and marks.count("x") >= 1  # v2 did not pass

    asyncio.run(scenario())


def test_a_version_without_sass_facts_is_named_with_why_and_nothing_charted_when_none_has_any(tmp_path):
    ws, now = replay_cpu_history(tmp_path / "ws")

    async def scenario():
        app = KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)
        async with app.run_test(size=(80, 24)) as pilot:
            text = "\n".join(await history_of(app, pilot, "crash_segfault"))
            assert "no SASS facts for v1: its run stopped before the dumps rung" in text
            assert "nothing to chart" in text
            assert not app.query_one("#history-plot", PlotextPlot).display
            text = "\n".join(await history_of(app, pilot, "compile_error"))
            assert "no SASS facts for v1: dumps skipped: nothing was compiled" in text

    asyncio.run(scenario())


# -- timed versions: the per-shape roofline figures, never a mean -------------------------------------
# add_triton's H200 fractions (issue 29, against a 3.5 µs launch floor: tests/measure/test_launch_floor.py)
# for v2; v1's are made up, lower, to compare with.
def shapes_summary(fractions: dict[str, tuple[float, str]], speedup: float) -> dict:
    shapes = {shape: {"roofline": f, "bound": bound} for shape, (f, bound) in fractions.items()}
    worst = min(shapes, key=lambda s: shapes[s]["roofline"])
    short = [s for s, v in shapes.items() if v["roofline"] < 0.9]
    return {"speedup": speedup, "roofline_shapes": shapes, "roofline_worst": {"shape": worst, **shapes[worst]},
            "roofline_done": 0.9, "satisfied": not short, "short": short}


def timed_history(tmp_path) -> Store:
    store = Store(tmp_path / "history.db")
    runs = {1: shapes_summary({"size=65536": (0.70, "launch-bound"), "size=4194304": (0.62, "memory-bound")}, 4.1),
            2: shapes_summary({"size=65536": (0.919, "launch-bound"), "size=4194304": (0.806, "memory-bound")}, 5.45),
            3: {"speedup": 5.5, "roofline": 0.9, "at_roofline": True}}  # as runs were recorded before per-shape figures
    for version, summary in runs.items():
        store.record(RunStarted(f"r{version}", kernel="add_triton", path="/w/kernels/add_triton.py", version=version,
                                content_hash=f"h{version}", reference="/w/references/add.py", reference_hash="rh",
                                tier="gpu", device="NVIDIA H200", arch="sm_90a", run_dir="/w/r", time=float(version)))
        store.record(RunFinished(f"r{version}", verdict="passed", summary=summary, duration_s=1.0, time=version + 0.5))
    return store


def test_each_version_s_roofline_is_its_worst_shape_never_a_mean(tmp_path):
    points = version_history(timed_history(tmp_path), "add_triton")
    assert [p.roofline for p in points] == [0.62, 0.806, None]  # v3's 90% was a mean across shapes: not shown
    assert KernelView(id="add_triton", path=Path("k.py"), summary=points[1].summary).roofline == 0.806


def test_the_history_compares_the_two_newest_timed_versions_shape_by_shape(tmp_path):
    points = version_history(timed_history(tmp_path), "add_triton")
    head = _head(points, [p for p in points if p.speedup is not None], current=3).plain
    assert "roofline ceiling" not in head
    assert ("attainable per shape, v2 against v1:\n"
            "  size=65536      92% (v1 70%, +22 points)  launch-bound\n"
            "  size=4194304    81% (v1 62%, +19 points)  memory-bound\n"
            "  v2 not satisfied: size=4194304 short of 90%") in head
