"""The history chart where nothing is timed: what each version's compiled code holds.

On the CPU tier no version has a speedup, but every version that compiled was built for the
target architecture and its SASS read by the dumps rung: instructions, registers and spill
instructions per version say how a change moved the code. Where a version has no SASS facts the
pane says which and why, in one line; where none has any, it charts the correctness shapes
each version passed. The key is in the pane's head (plotext's legend would cover the points),
and every point stays off the frame: the axes are padded around the values.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual_plotext import PlotextPlot

from ktui.tui.versions import VersionPoint

INSTR, REGS, SPILL, FAILED = "•", "◆", "s", "x"
LABEL_WIDTH = 6  # columns one x label ("v123" and a gap) needs, so none is cut or merged


def code_head(points: list[VersionPoint]) -> Text:
    """The sentences above the chart: why there is no speedup, the key, and what is missing."""
    text = Text()
    cpu = all(p.tier in ("cpu", "-", "") for p in points)
    text.append("no speedup: nothing is timed on the CPU tier" if cpu
                else "no speedup yet: no version has passed its benchmark", style="bold")
    with_code = [p for p in points if p.code is not None]
    missing = [p for p in points if p.code is None]
    if with_code:
        text.append(" · the compiled code per version\n", style="bold")
        text.append(f"{INSTR} instructions (left)  {REGS} registers (right)  {FAILED} not passed")
        if any(p.code.spills for p in with_code):
            text.append(f"  {SPILL} spill instr (left)", style="bold red")
        else:
            text.append("  no spills")
        text.append("\n")
    elif any(p.correct is not None for p in points):
        text.append(" · correct shapes per version\n", style="bold")
        text.append(f"{INSTR} shapes passed  {FAILED} not passed\n")
    else:
        text.append(" · and no version compiled and ran: nothing to chart\n", style="bold")
    if missing:
        text.append(f"no SASS facts for {_versions(missing)}: {missing[-1].code_missing}\n", style="dim")
    return text


def draw_code(plot: PlotextPlot, points: list[VersionPoint]) -> bool:
    """Draw the chart; False when no version has anything to chart (the head says why)."""
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    with_code = [p for p in points if p.code is not None]
    if with_code:
        _draw_facts(plt, with_code)
        shown = with_code
    else:
        shown = [p for p in points if p.correct is not None]
        _draw_correct(plt, shown)
    if not shown:
        return False
    versions = [p.version for p in shown]
    plt.xlim(min(versions) - 0.5, max(versions) + 0.5)
    width = plot.size.width or 80
    step = max(1, math.ceil(len(versions) * LABEL_WIDTH / max(LABEL_WIDTH, width - 16)))
    ticks = versions[::step]
    plt.xticks(ticks, [f"v{v}" for v in ticks])
    return True


def _draw_facts(plt, points: list[VersionPoint]) -> None:
    """Instructions on the left axis, in the upper half; registers on the right, in the lower
    half: two series of different units never draw over each other, even when both are flat."""
    instr = [p for p in points if p.code.instructions is not None]
    spills = [p for p in points if p.code.spills]
    left = [p.code.instructions for p in instr] + [p.code.spills for p in spills]
    if instr:
        _series(plt, [p.version for p in instr], [p.code.instructions for p in instr], INSTR, "cyan", "left")
        failed = [p for p in instr if p.verdict != "passed"]
        if failed:
            plt.scatter([p.version for p in failed], [p.code.instructions for p in failed], marker=FAILED,
                        color="red")
    if spills:
        plt.scatter([p.version for p in spills], [p.code.spills for p in spills], marker=SPILL, color="red")
    if left:
        _axis(plt, left, "left", upper=True)
    regs = [p for p in points if p.code.registers is not None]
    _series(plt, [p.version for p in regs], [p.code.registers for p in regs], REGS, "magenta", "right")
    _axis(plt, [p.code.registers for p in regs], "right", upper=False)


def _series(plt, xs: list[int], ys: list[int], marker: str, color: str, side: str) -> None:
    """A thin line through the versions, each version's own point on it as a symbol."""
    if len(xs) > 1:
        plt.plot(xs, ys, marker="braille", color=color, yside=side)
    plt.scatter(xs, ys, marker=marker, color=color, yside=side)


def _axis(plt, values: list[int], side: str, upper: bool) -> None:
    """The axis range puts the values in one half with room to the frame; its ticks are the
    values' own lowest and highest, whole numbers, so they read as facts, not as 40.67."""
    low, high = min(values), max(values)
    span = max(1.0, high - low, 0.1 * high)
    below, above = (2.0, 0.5) if upper else (0.5, 2.0)
    plt.ylim(low - below * span, high + above * span, yside=side)
    ticks = sorted({low, high})
    plt.yticks(ticks, [str(t) for t in ticks], yside=side)


def _draw_correct(plt, points: list[VersionPoint]) -> None:
    if not points:
        return
    _series(plt, [p.version for p in points], [p.correct[0] for p in points], INSTR, "cyan", "left")
    failed = [p for p in points if p.verdict != "passed"]
    if failed:
        plt.scatter([p.version for p in failed], [p.correct[0] for p in failed], marker=FAILED, color="red")
    top = max(p.correct[1] for p in points)
    plt.ylim(-0.5, top + 0.5)
    ticks = sorted({0, top, *(p.correct[0] for p in points)})
    plt.yticks(ticks, [str(t) for t in ticks])


def _versions(points: list[VersionPoint]) -> str:
    if len(points) > 3:
        return f"{len(points)} versions (v{points[0].version}…v{points[-1].version})"
    return ", ".join(f"v{p.version}" for p in points)
