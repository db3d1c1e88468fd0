"""The history pane where nothing is timed (the CPU tier): each version's compiled code, charted
from the dumps rung's SASS facts in the history, readable at 80×24."""

from __future__ import annotations

import asyncio
import re

from dashboard_fixture import replay_cpu_history
from textual_plotext import PlotextPlot

from ktui.tui.app import KtuiApp
from ktui.workspace.folder import Workspace


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
