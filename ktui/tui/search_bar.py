"""``/``: the one-line input a search query is typed into, under the panes.

It opens for one pane (the focused one), hands the query up on Enter (``Search``) and gives the
focus back to where it was, on Enter and on Escape alike. Where the focus has nothing to search it
opens all the same, saying so: what is typed after ``/`` is a query, never the dashboard's keys.
Its looks are in ``app.tcss``.
"""

from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input

from ktui.tui.searchable import Searchable


class SearchBar(Input):
    BINDINGS = [Binding("escape", "close", "close", show=False)]

    class Search(Message):
        """The user asked for ``query`` in ``pane`` (an empty query clears the search); ``pane`` is
        None where the bar opened with nothing to search."""

        def __init__(self, pane: Searchable | None, query: str) -> None:
            super().__init__()
            self.pane = pane
            self.query = query

    def __init__(self, **kwargs) -> None:
        super().__init__(compact=True, **kwargs)
        self.pane: Searchable | None = None
        self.back_to: Widget | None = None

    def open(self, pane: Searchable | None, back_to: Widget | None, nothing_here: str = "") -> None:
        """For ``pane``, or, with None, for nothing: ``nothing_here`` says so and where search works."""
        self.pane, self.back_to = pane, back_to
        self.placeholder = (f"search {pane.BORDER_TITLE} · Enter finds · Esc closes" if pane is not None
                            else f"{nothing_here} · Esc closes")
        self.value = pane.query_text if pane is not None else ""
        self.add_class("-open")
        self.focus()  # the old query, selected: typing replaces it

    def action_close(self) -> None:
        self.remove_class("-open")
        back_to, self.back_to = self.back_to, None
        if back_to is not None and back_to.is_attached:
            back_to.focus()
        elif self.pane is not None and self.pane.is_attached:
            self.pane.focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        pane = self.pane
        self.action_close()
        if pane is None or pane.is_attached:
            self.post_message(self.Search(pane, event.value))

    def on_blur(self) -> None:
        """Clicking elsewhere closes it too: a hidden input must not keep the keys."""
        if self.has_class("-open"):
            self.remove_class("-open")
