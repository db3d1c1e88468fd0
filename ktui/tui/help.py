"""``?``: every key, built from the app's live key map, and what the list's glyphs mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ktui.tui.text import STATUS_LABELS

LEGEND = ("new", "queued", "running", "passed", "compiled", "failed", "crashed", "timed_out", "suspicious", "error")


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close")]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self.keys = keys

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        for key, what in self.keys:
            table.add_row(key, what)
        legend = Text("\n")
        for status in LEGEND:
            glyph, word = STATUS_LABELS[status]
            legend.append(f"{glyph} {word}   ")
        legend.append("\nstale: the results shown predate the file (or its reference) on disk")
        with VerticalScroll(id="help-box"):
            yield Static(Text("ktui watch — keys", style="bold"))
            yield Static(table)
            yield Static(legend)
            yield Static(Text("escape or ? closes this", style="dim"))
