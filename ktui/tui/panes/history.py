"""Speedup history: speedup over the reference per version, read from the history store.

Failed versions are marked at zero and the best version is starred; under the chart the two newest
timed versions are compared shape by shape on their fraction of the attainable time and bound
(``ktui.history.rooflines``, as ``ktui diff`` does: never a mean across shapes). Where
nothing is timed (the CPU tier) there is no speedup, but every version was still compiled for the
target: the pane charts what its SASS holds instead (``panes/code_chart.py``). On ``o`` the pane
shows every version's benchmark shapes on the GPU's roofline instead (``panes/roofline.py``).
"""

from __future__ import annotations

from rich.text import Text
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ktui.history import roofline_chart, rooflines
from ktui.history.best import best_version
from ktui.tui.panes.code_chart import code_head, draw_code
from ktui.tui.panes.roofline import draw_roofline, roofline_head
from ktui.tui.searchable import Shown
from ktui.tui.text import STATUS_LABELS
from ktui.tui.versions import VersionPoint, compared_versions
from ktui.tui.view import PaneView


class HistoryPane(Vertical):
    BORDER_TITLE = "3 history"
    view: reactive[PaneView | None] = reactive(None, always_update=True)
    roofline: reactive[bool] = reactive(False)  # ``o``: the benchmark shapes on the GPU's roofline
    _drawn: tuple | None = None  # (points, version, roofline) drawn last: redrawn only when they change

    def compose(self):
        yield Shown(id="history-head")
        yield PlotextPlot(id="history-plot")

    def toggle_roofline(self) -> None:
        self.roofline = not self.roofline

    def watch_roofline(self, roofline: bool) -> None:
        if self.view is not None:
            self.view = self.view

    def watch_view(self, view: PaneView | None) -> None:
        if view is None:
            return
        current = view.kernel.version if view.kernel is not None else None
        if self._drawn is not None and self._drawn[0] is view.points and self._drawn[1:] == (current, self.roofline):
            return
        self._drawn = (view.points, current, self.roofline)
        if self.roofline:
            self._draw_roofline(view, current)
        else:
            self._draw(list(view.points), current)

    def _draw_roofline(self, view: PaneView, current: int | None) -> None:
        head = self.query_one("#history-head", Static)
        plot = self.query_one("#history-plot", PlotextPlot)
        kernel = view.kernel
        found = roofline_chart.points(view.store, kernel.id) if kernel is not None else []
        if not found:
            head.update(Text.assemble(("roofline: no version was timed", "bold"), " with the reference's bytes_moved "
                                      "and flops (benchmarks run on a GPU; the CPU tier times nothing) · o: speedup"))
            plot.display = False
            return
        device = found[-1].device  # the newest timed version's GPU: one roofline at a time
        drawn = [p for p in found if p.device == device]
        roofs, why = roofline_chart.roofs_for(view.root, device, roofline_chart.done_of(kernel.summary))
        best = best_version(view.points)
        best_number = best.version if best is not None else None
        head.update(roofline_head(drawn, roofs, why, best_number, current, len(found) - len(drawn)))
        plot.display = roofs is not None
        if roofs is not None:
            draw_roofline(plot, drawn, roofs, best_number, current)
            plot.refresh()

    def _draw(self, points: list[VersionPoint], current: int | None) -> None:
        head = self.query_one("#history-head", Static)
        plot = self.query_one("#history-plot", PlotextPlot)
        timed = [p for p in points if p.speedup is not None]
        head.update(_head(points, timed, current))
        if timed:
            _draw(plot, points)
        plot.display = bool(timed) or (bool(points) and draw_code(plot, points))
        if plot.display:
            plot.refresh()


LISTED = 12  # versions listed by verdict under the chart: the newest, and always the current one
NBSP = "\u00a0"  # inside one item, so a line breaks between versions, never inside one


def _head(points: list[VersionPoint], timed: list[VersionPoint], current: int | None = None) -> Text:
    if not points:
        return Text("no finished runs yet", style="dim")
    text = Text()
    if not timed:
        text.append_text(code_head(points))
    else:
        # The chart's key: plotext's own legend would cover the points in a short pane.
        best = best_version(points)
        text.append("• speedup per version  x failed (at 0)  ")
        if best is not None:
            text.append(f"* best v{best.version} {best.speedup:.2f}x", style="bold")
        text.append("\n── reference 1.00x · o: the shapes on the roofline\n")
        pair = compared_versions(points)
        if pair is not None:
            older, newer = pair
            text.append("\n".join(rooflines.lines(older.version, older.summary, newer.version, newer.summary)) + "\n")
    # The verdict of every version, newest last, so a CPU history still tells a story.
    listed = points[-LISTED:]
    if current is not None and all(p.version != current for p in listed):
        listed = [p for p in points if p.version == current] + points[-(LISTED - 1):]
    gpus = len({p.gpu for p in points if p.gpu})
    for p in listed:
        glyph, word = STATUS_LABELS.get(p.verdict, ("?", p.verdict))
        speed = f" {p.speedup:.2f}x" if p.speedup is not None else ""
        where = f" gpu{p.gpu}" if p.gpu and gpus > 1 else ""  # which GPU ran it, once several did
        item = f"v{p.version} {glyph} {word}{speed}{where}".replace(" ", NBSP)
        text.append(item, style="bold" if p.version == current else "")
        text.append("   ")
    return text


def _draw(plot: PlotextPlot, points: list[VersionPoint]) -> None:
    plt = plot.plt
    plt.clear_data()
    plt.clear_figure()
    versions = [p.version for p in points]
    passed = [p for p in points if p.verdict == "passed" and p.speedup is not None]
    failed = [p for p in points if p.verdict != "passed"]
    if passed:
        plt.plot([p.version for p in passed], [p.speedup for p in passed], marker="dot")
    if failed:
        plt.scatter([p.version for p in failed], [0.0] * len(failed), marker="x", color="red")
    best = best_version(points)
    if best is not None:
        plt.scatter([best.version], [best.speedup], marker="*", color="green")
    plt.hline(1.0, "gray")  # the reference's own speed
    step = max(1, len(versions) // 12)  # keep the labels readable on long histories
    shown = versions[::step]
    plt.xticks(shown, [f"v{v}" for v in shown])
    plt.ylabel("speedup ×")
    top = max([p.speedup for p in passed] + [1.0])
    # 0 is on the axis only when failed versions are drawn there: in a short pane a range from 0
    # would put the 1.00x line on the bottom row with the failures
    low = 0.0 if failed else min([p.speedup for p in passed] + [1.0]) * 0.8
    plt.ylim(low, top * 1.15)
