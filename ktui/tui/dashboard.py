"""The dashboard's layout: the kernel list and the six panes, for the terminal's width.

At 80 columns the panes share one tabbed area under the kernel list; from ``WIDE`` columns on
they sit side by side.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Container, Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from ktui.tui.panes.compile_errors import CompilePane
from ktui.tui.panes.history import HistoryPane
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.ncu import NcuPane
from ktui.tui.panes.output import OutputPane
from ktui.tui.panes.rungs import RungsPane
from ktui.tui.panes.sass_diff import SassPane

WIDE = 120  # columns from which the panes sit side by side
PANES = ((1, "compile"), (2, "rungs"), (3, "history"), (4, "sass"), (5, "ncu"), (6, "output"))


class Dashboard(Container):
    """The kernel list and the six panes, laid out for the terminal's width."""

    def __init__(self, root: Path, wide: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.root = root
        self.wide = wide

    def compose(self) -> ComposeResult:
        panes = self._panes()
        if self.wide:
            self.add_class("-wide")
            with Horizontal(id="columns"):
                with Vertical(id="left"):
                    yield KernelList(id="kernel-list")
                    yield panes[1]
                    yield panes[3]
                    yield panes[6]
                with Vertical(id="right"):
                    yield panes[2]
                    yield panes[4]
                    yield panes[5]
        else:
            self.remove_class("-wide")
            yield KernelList(id="kernel-list")
            with TabbedContent(id="tabs"):
                for number, name in PANES:
                    with TabPane(f"{number} {name}", id=f"tab-{number}"):
                        yield panes[number]

    def _panes(self) -> dict[int, Widget]:
        return {
            1: CompilePane(id="pane-1", classes="pane"),
            2: RungsPane(id="pane-2", classes="pane"),
            3: HistoryPane(id="pane-3", classes="pane"),
            4: SassPane(id="pane-4", classes="pane"),
            5: NcuPane(id="pane-5", classes="pane"),
            6: OutputPane(id="pane-6", classes="pane"),
        }
