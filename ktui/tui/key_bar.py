"""The footer: the keys that fit, chosen by how much a user needs them, never a cut-off word.

Textual's own footer gives every binding a cell and clips what does not fit (``s stri``); this
one writes whole ``key word`` pairs in the bindings' order, dropping the least needed first, and
always keeps ``? help`` and ``q quit``.
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

# Most needed first: what survives at 40 columns, then what joins as the terminal widens.
PRIORITY = ("quit", "help", "rerun", "pane(1)", "profile", "toggle_strict", "toggle_follow", "rerun_all",
            "cycle_base", "pin", "search", "toggle_wrap", "command_palette")
GAP = "  "


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { height: 1; padding: 0 1; background: $panel; }
    """

    def __init__(self, bindings: list[Binding], **kwargs) -> None:
        super().__init__(**kwargs)
        self.bindings = [b for b in bindings if b.show] + [Binding("ctrl+p", "command_palette", "palette",
                                                                    key_display="^p")]

    def on_mount(self) -> None:
        self.update(self.line(self.content_size.width or 80))

    def on_resize(self) -> None:
        self.update(self.line(self.content_size.width or 80))

    def line(self, width: int) -> Text:
        chosen: set[str] = set()
        used = 0
        for action in PRIORITY:
            binding = next((b for b in self.bindings if b.action == action), None)
            if binding is None:
                continue
            cost = len(_label(binding)) + (len(GAP) if chosen else 0)
            if used + cost > width:
                break
            chosen.add(action)
            used += cost
        out = Text(no_wrap=True)
        for binding in (b for b in self.bindings if b.action in chosen):
            if out:
                out.append(GAP)
            out.append(binding.key_display or binding.key, style="bold")
            out.append(f" {binding.description}")
        return out


def _label(binding: Binding) -> str:
    return f"{binding.key_display or binding.key} {binding.description}"
