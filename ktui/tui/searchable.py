"""Panes a user can search (``/``, ``n``, ``N``) and text panes a user can wrap (``w``), as in less,
bacon or k9s.

A text pane's texts are ``PaneText`` widgets: each keeps what its pane drew and, only while a search
or a wrap toggle is on, draws it again as rows with the matches marked (otherwise the pane looks
exactly as it draws itself). ``TextPane`` is the scrolling pane around them: it searches its texts
in order, keeps the current match and scrolls to it. A pane drawn as a table (the kernel list, the
rungs) is a ``RowSearch``: a search puts the table's cursor on the rows that hold the query.
"""

from __future__ import annotations

import itertools
import re
from typing import NamedTuple

from rich.console import Console, Group, RenderableType
from rich.text import Text
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from ktui.tui.text import shown

UNCUT_WIDTH = 400  # source code drawn by Syntax is turned into rows this wide, then trimmed
SEARCH_MATCHES = 1000  # the most matches a search marks in a pane: the first ones, in reading order


def search_pattern(query: str) -> re.Pattern[str]:
    """The query as literal text (``[R1]`` means what it says); smart case: case-insensitive
    unless the query has a capital letter."""
    return re.compile(re.escape(query), 0 if any(c.isupper() for c in query) else re.IGNORECASE)


def text_rows(content: RenderableType, console: Console) -> list[Text]:
    """What a pane drew, as one rich Text per line it draws before wrapping, styles kept."""
    if isinstance(content, str):
        content = Text(content)
    if isinstance(content, Text):
        if not content.plain:
            return []
        rows = list(content.split("\n", allow_blank=True))
        for row in rows:
            row.no_wrap, row.end = content.no_wrap, "\n"
        return rows
    if isinstance(content, Group):
        return [row for part in content.renderables for row in text_rows(part, console)]
    # anything else (the source around a compile error, drawn by Syntax): its lines as drawn, uncut
    options = console.options.update(width=UNCUT_WIDTH, no_wrap=True, highlight=False)
    lines = console.render_lines(content, options, pad=False, new_lines=False)
    rows = []
    for line in lines:
        row = Text.assemble(*((s.text, s.style) for s in line if not s.control), no_wrap=True, overflow="crop")
        row.rstrip()
        rows.append(row)
    return rows


def row_height(row: Text, width: int, console: Console) -> int:
    """How many terminal lines one row takes at ``width`` (Rich's own wrapping, as drawn)."""
    if row.no_wrap or width <= 0 or row.cell_len <= width:
        return 1
    return len(row.wrap(console, width, justify=row.justify, overflow=row.overflow)) or 1


class Match(NamedTuple):
    row: int
    start: int
    end: int


class Shown(Static):
    """A Static that draws what it is given with ``shown``: control characters visible, no markup."""

    def update(self, content: RenderableType = "", *, layout: bool = True) -> None:
        super().update(shown(content), layout=layout)


class PaneText(Shown):
    """A Static whose text can be searched and re-wrapped; ``update`` is the pane's own call."""

    COMPONENT_CLASSES = {"pane-text--match", "pane-text--current"}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.source: RenderableType = self.content  # what the pane drew, before any marking
        self.pattern: re.Pattern[str] | None = None
        self.wrap_rows: bool | None = None  # None: as the pane draws them; True: all fold; False: all cut
        self.current: int | None = None  # the index in ``matches`` of the pane's current match
        self.matches: list[Match] = []
        self.more = False  # more matches than ``match_limit``: not marked
        self.match_limit = SEARCH_MATCHES  # what its pane leaves it of ``SEARCH_MATCHES``
        self._drawn = True  # False: its matches were found but not yet drawn
        self._row_cache: list[Text] | None = None

    def update(self, content: RenderableType = "", *, layout: bool = True) -> None:
        self.source, self._row_cache = shown(content), None
        self._draw(layout=layout)

    def restyle(self, pattern: re.Pattern[str] | None, wrap_rows: bool | None, current: int | None,
                match_limit: int = SEARCH_MATCHES, draw: bool = True) -> None:
        """Search and mark anew; with ``draw`` False the matches are found, to be drawn by the next
        call (a search draws its text once, with its current match). A call that changes nothing
        draws nothing: stepping to the next match redraws only the texts it leaves and enters."""
        style = (pattern, wrap_rows, current, match_limit)
        if style == (self.pattern, self.wrap_rows, self.current, self.match_limit) and self._drawn:
            return
        self.pattern, self.wrap_rows, self.current, self.match_limit = style
        self._draw(draw=draw)

    def find(self) -> list[Match]:
        """The matches of ``pattern``, the first ``match_limit`` + 1 at most: a flood of output
        searched for one letter would otherwise be millions of marks to draw (the one more says
        there were more)."""
        if self.pattern is None:
            return []
        found = (Match(i, m.start(), m.end()) for i, row in enumerate(self.rows())
                 for m in self.pattern.finditer(row.plain) if m.end() > m.start())
        return list(itertools.islice(found, self.match_limit + 1))

    def rows(self) -> list[Text]:
        if self._row_cache is None:
            self._row_cache = text_rows(self.source, self.app.console)
        return self._row_cache

    def row_tops(self) -> list[int]:
        """The first terminal line of each row inside this widget, at its width now."""
        tops, y = [], 0
        width = self.content_size.width
        for row in self._drawn_rows(marked=False):
            tops.append(y)
            y += row_height(row, width, self.app.console)
        return tops

    def _draw(self, layout: bool = True, draw: bool = True) -> None:
        if self.pattern is None and self.wrap_rows is None:
            self.matches, self.current, self.more = [], None, False
            if draw:
                super().update(self.source, layout=layout)
        else:
            found = self.find()
            self.more = len(found) > self.match_limit
            self.matches = found[: self.match_limit]
            if self.current is not None and self.current >= len(self.matches):
                self.current = None
            if draw:
                super().update(Group(*self._drawn_rows(marked=True)), layout=layout)
        self._drawn = draw
        if isinstance(self.parent, TextPane):
            self.parent.show_position()

    def _drawn_rows(self, marked: bool) -> list[Text]:
        drawn = []
        for row in self.rows():
            if self.wrap_rows is not None:
                row = row.copy()
                row.no_wrap, row.overflow = not self.wrap_rows, "fold" if self.wrap_rows else "ellipsis"
            drawn.append(row)
        if marked and self.matches:
            drawn = [row.copy() for row in drawn]
            match, current = (self.get_component_rich_style("pane-text--match"),
                              self.get_component_rich_style("pane-text--current"))
            for k, (row, start, end) in enumerate(self.matches):
                drawn[row].stylize(current if k == self.current else match, start, end)
        return drawn


class Found(NamedTuple):
    """Where a search or a step landed: the match's number (from 1), the count, whether it wrapped."""

    number: int
    count: int
    wrapped: bool = False
    more: bool = False  # more matches than ``SEARCH_MATCHES``: ``count`` is the first ones

    @property
    def counted(self) -> str:
        """``17``, or ``1000+`` past the bound."""
        return f"{self.count}+" if self.more else str(self.count)


class TextPane(VerticalScroll):
    """A scrolling pane of ``PaneText``: ``search``, ``step`` (n / N) and ``wrap`` (w)."""

    WRAPS = False  # the pane's own layout: do its long lines wrap (prose) or get cut (code)?
    wrap: reactive[bool] = reactive(False, init=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.set_reactive(TextPane.wrap, self.WRAPS)
        self.query_text = ""

    def texts(self) -> list[PaneText]:
        return list(self.query(PaneText))

    def search(self, query: str) -> Found | None:
        """Mark every match of ``query``; the current one is the first at or below the top of the
        view (wrapping to the first). ``None`` when nothing matches."""
        self.query_text = query
        self._restyle(None, draw=False)  # drawn once, below, with the current match
        found = self._flat()
        if not found:
            self._restyle(None)
            return None
        tops = {text: text.row_tops() for text in self.texts()}
        ys = [text.virtual_region.y + tops[text][text.matches[index].row] for text, index in found]
        later = next((k for k, y in enumerate(ys) if y >= self.scroll_y), None)
        self._go(0 if later is None else later)
        return Found(1 + (later or 0), len(found), wrapped=later is None, more=self._more())

    def step(self, direction: int) -> Found | None:
        """The next (1) or previous (-1) match, wrapping around the pane's ends."""
        found = self._flat()
        if not found:
            return None
        now = self._current(found)
        if now is None:
            target, wrapped = (0 if direction > 0 else len(found) - 1), False
        else:
            target = (now + direction) % len(found)
            wrapped = target < now if direction > 0 else target > now
        self._go(target)
        return Found(target + 1, len(found), wrapped, more=self._more())

    def clear_search(self) -> None:
        self.query_text = ""
        self._restyle(None)

    def watch_wrap(self, wrap: bool) -> None:
        now = self._current(self._flat())
        self._restyle(None)
        if now is not None:
            self._go(now)

    def show_position(self) -> None:
        """``/query 3/17`` under the pane's border while a search is on."""
        if not self.query_text:
            self.border_subtitle = ""
            return
        found = self._flat()
        now = self._current(found)
        count = f"{len(found)}+" if self._more() else str(len(found))
        where = f"{now + 1}/{count}" if now is not None else f"{count} found"
        self.border_subtitle = f"/{self.query_text} {where}"

    def _more(self) -> bool:
        return any(text.more for text in self.texts())

    def _flat(self) -> list[tuple[PaneText, int]]:
        """Every match of the pane in reading order, as (text, its index in that text)."""
        return [(text, index) for text in self.texts() for index in range(len(text.matches))]

    @staticmethod
    def _current(found: list[tuple[PaneText, int]]) -> int | None:
        return next((k for k, (text, index) in enumerate(found) if text.current == index), None)

    def _restyle(self, current: tuple[PaneText, int] | None, draw: bool = True) -> None:
        pattern = search_pattern(self.query_text) if self.query_text else None
        wrap_rows = None if self.wrap == self.WRAPS else self.wrap
        left = SEARCH_MATCHES  # for the whole pane, its texts in reading order
        for text in self.texts():
            text.restyle(pattern, wrap_rows, current[1] if current and current[0] is text else None, left, draw)
            left -= len(text.matches)

    def _go(self, k: int) -> None:
        self._restyle(self._flat()[k])
        self.call_after_refresh(self._scroll_to_current)

    def _scroll_to_current(self) -> None:
        region = self.match_region()
        if region is not None:
            self.scroll_to_region(region, animate=False, center=True, immediate=True)

    def match_region(self) -> Region | None:
        """The current match's lines, in the pane's scrolling coordinates (``scroll_y`` is the top)."""
        found = self._flat()
        now = self._current(found)
        if now is None:
            return None
        text, index = found[now]
        row = text.matches[index].row
        height = row_height(text._drawn_rows(marked=False)[row], text.content_size.width, self.app.console)
        top = text.virtual_region.y + text.row_tops()[row]
        return Region(0, top, max(1, self.scrollable_content_region.width), height)


class RowSearch:
    """Mixed into a pane drawn as a table: ``search`` puts the cursor on the first row at or below
    it that holds the query (wrapping to the first), ``step`` on the next or previous such row. The
    rows are read as they are drawn now, so a search follows the table as it changes."""

    query_text = ""

    def searched_table(self) -> DataTable:
        """The table searched: the pane itself where it is one."""
        return self  # type: ignore[return-value]

    def search(self, query: str) -> Found | None:
        self.query_text = query
        rows = self._matching_rows()
        self._show_query()
        if not rows:
            return None
        cursor = max(self.searched_table().cursor_row, 0)
        later = next((k for k, row in enumerate(rows) if row >= cursor), None)
        self._go(rows[later or 0])
        return Found(1 + (later or 0), len(rows), wrapped=later is None)

    def step(self, direction: int) -> Found | None:
        rows = self._matching_rows()
        if not rows:
            return None
        cursor = self.searched_table().cursor_row
        if cursor in rows:
            k = rows.index(cursor)
            target = (k + direction) % len(rows)
            wrapped = target < k if direction > 0 else target > k
        else:  # the cursor left the matches: the next one from where it is
            ahead = [k for k, row in enumerate(rows) if (row > cursor if direction > 0 else row < cursor)]
            target = (ahead[0] if direction > 0 else ahead[-1]) if ahead else (0 if direction > 0 else len(rows) - 1)
            wrapped = not ahead
        self._go(rows[target])
        return Found(target + 1, len(rows), wrapped)

    def clear_search(self) -> None:
        self.query_text = ""
        self._show_query()

    def _matching_rows(self) -> list[int]:
        if not self.query_text:
            return []
        table, pattern = self.searched_table(), search_pattern(self.query_text)
        return [i for i in range(table.row_count)
                if pattern.search(" ".join(getattr(cell, "plain", str(cell)) for cell in table.get_row_at(i)))]

    def _go(self, row: int) -> None:
        self.searched_table().move_cursor(row=row)

    def _show_query(self) -> None:
        """``/query`` under the pane's border while a search is on."""
        self.border_subtitle = f"/{self.query_text}" if self.query_text else ""  # type: ignore[attr-defined]


Searchable = TextPane | RowSearch  # what ``/``, ``n`` and ``N`` work in
