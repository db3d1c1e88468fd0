"""What the selected kernel printed in its newest run: live while it runs, from the run folder's
output.txt afterwards (the same file an agent reads)."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ktui.protocol.statedir import OUTPUT_FILE
from ktui.protocol.visible import visible
from ktui.tui.searchable import PaneText, TextPane
from ktui.tui.state import KernelView
from ktui.tui.view import PaneView

SHOWN_LINES = 2000  # the newest lines; the whole output is in output.txt
SHOWN_CHARS = 200_000  # and at most this many characters of them: drawing, wrapping and searching stay quick


class OutputPane(TextPane):
    BORDER_TITLE = "6 output"
    WRAPS = True  # printed lines wrap; w cuts them at the edge

    def compose(self):
        yield PaneText(id="output-head")
        yield PaneText(id="output-body")

    view: reactive[PaneView | None] = reactive(None, always_update=True)

    def watch_view(self, pane_view: PaneView | None) -> None:
        if pane_view is None:
            return
        view = pane_view.kernel
        head, lines = printed(view)
        self.query_one("#output-head", Static).update(head)
        self.query_one("#output-body", Static).update(Text(visible("\n".join(lines))))
        if view is not None and view.state == "running":
            self.scroll_end(animate=False)


def printed(view: KernelView | None) -> tuple[Text, list[str]]:
    """The pane's head line and the lines to show."""
    if view is None:
        return Text("no kernel selected", style="dim"), []
    if view.version is None:
        return Text(f"{view.id}: not run yet", style="dim"), []
    lines = list(view.output)
    if not lines and view.state != "running" and view.run_dir:
        try:
            lines = (Path(view.run_dir) / OUTPUT_FILE).read_text(errors="replace").splitlines()
        except OSError:
            lines = []
    where = f"{view.id} v{view.version}" + (" (running)" if view.state == "running" else "")
    if not lines:
        return Text(f"{where}: printed nothing", style="dim"), []
    shown = newest(lines)
    cut = f", the last {len(shown)} shown" if len(shown) < len(lines) else ""
    return Text(f"{where}: {len(lines)} line(s) printed{cut}", style="dim"), shown


def newest(lines: list[str]) -> list[str]:
    """The newest lines, at most ``SHOWN_LINES`` of them and ``SHOWN_CHARS`` characters (at least one line)."""
    kept, used = [], 0
    for line in reversed(lines[-SHOWN_LINES:]):
        used += len(line) + 1
        if kept and used > SHOWN_CHARS:
            break
        kept.append(line)
    return kept[::-1]
