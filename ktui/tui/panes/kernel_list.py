"""The kernel list: one row per kernel — its state, speedups, worst shape's roofline, version, age."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from ktui.protocol.visible import visible
from ktui.tui.searchable import RowSearch
from ktui.tui.state import KernelView
from ktui.tui.text import ago, speedup_text, state_label

# (key, label, width); None sizes the column to its longest cell. The state column's width is its
# least: it grows to its longest cell (``▶ bench 1/3 · calibrating the GPU``) in the room the others leave.
COLUMNS = (("state", "state", 13), ("kernel", "kernel", None), ("v", "v", 4), ("last", "last", 6),
           ("best", "best", 6), ("roof", "roof", 4), ("age", "age", 5))
STATE = ColumnKey("state")


class KernelList(RowSearch, DataTable):
    """Rows keyed by kernel id; highlighting a row tells the app which kernel to show; ``/`` finds a
    kernel by any word of its row."""

    BORDER_TITLE = "kernels"
    BINDINGS = [Binding("enter", "select_cursor", "select", show=False)]
    COMPONENT_CLASSES = {
        "kernel-list--passed", "kernel-list--failed", "kernel-list--running", "kernel-list--queued",
        "kernel-list--muted", "kernel-list--stale", "kernel-list--suspicious", "kernel-list--compiled",
    }

    class Selected(Message):
        def __init__(self, kernel_id: str) -> None:
            super().__init__()
            self.kernel_id = kernel_id

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._texts: dict[str, tuple] = {}

    def on_mount(self) -> None:
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)

    # -- attributes down -----------------------------------------------------------------------
    def show(self, views: list[KernelView], now: float) -> None:
        """Make the rows match ``views`` (add, update in place, remove), keeping the cursor."""
        wanted = {v.id for v in views}
        for kernel_id in [k for k in self._texts if k not in wanted]:
            self.remove_row(kernel_id)
            del self._texts[kernel_id]
        for view in views:
            self.update_view(view, now)

    def update_view(self, view: KernelView, now: float) -> None:
        cells = self._cells(view, now)
        plain = tuple(c.plain for c in cells)
        old = self._texts.get(view.id)
        if old is None:
            self.add_row(*cells, key=view.id)
            self._texts[view.id] = plain
            self.fit_state_column()
            return
        if old == plain:
            return
        for (key, _, _), cell, before, after in zip(COLUMNS, cells, old, plain):
            if before != after:
                self.update_cell(view.id, key, cell, update_width=key == "kernel")
        self._texts[view.id] = plain
        if old[0] != plain[0]:
            self.fit_state_column()

    def fit_state_column(self) -> None:
        """The state column as wide as its longest cell, within the list's width less the other
        columns (a cell wider than that ends with "…"); never narrower than its least width."""
        column = self.columns.get(STATE)
        if column is None:
            return
        others = sum(c.get_render_width(self) for key, c in self.columns.items() if key != STATE)
        room = self.scrollable_content_region.width - others - 2 * self.cell_padding
        longest = max((cell_len(cells[0]) for cells in self._texts.values()), default=0)
        width = max(COLUMNS[0][2], min(longest, room))
        if width != column.width:
            column.width = width
            self._clear_caches()
            self._require_update_dimensions = True  # DataTable's own way to re-measure, on its next idle
            self.refresh()

    def on_resize(self) -> None:
        self.fit_state_column()

    def select(self, kernel_id: str) -> None:
        if kernel_id in self._texts:
            self.move_cursor(row=self.get_row_index(kernel_id))

    @property
    def selected_id(self) -> str | None:
        if not self._texts or self.cursor_row < 0 or self.cursor_row >= self.row_count:
            return None
        return str(self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value)

    # -- messages up ---------------------------------------------------------------------------
    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        # A highlight for a row the cursor has already left (rows were added, the app moved the
        # cursor since) is stale: only the cursor's row is the selection.
        if event.cursor_row != self.cursor_row or event.row_key is None or event.row_key.value is None:
            return
        self.post_message(self.Selected(str(event.row_key.value)))

    # -- cells ---------------------------------------------------------------------------------
    def _style(self, name: str):
        return self.get_component_rich_style(f"kernel-list--{name}", partial=True)

    def _cells(self, view: KernelView, now: float) -> tuple[Text, ...]:
        glyph, word = state_label(view.state, view.summary)
        if view.state == "running":
            word = view.rung_progress()
        tone = "compiled" if word == "compiled" else _tone(view.state)  # not run: not the colour of a pass
        state = Text(f"{glyph} {word}", style=self._style(tone), no_wrap=True, overflow="ellipsis")
        version = Text(f"v{view.version}" if view.version is not None else "")
        if view.state in ("queued", "running") and view.stale:
            # what waits or starts is the content on disk, not the version shown so far
            version = Text("new", style=self._style("queued"))
        last = Text(speedup_text(view.last_speedup) if view.verdict == "passed" else "")
        best = Text(speedup_text(view.best_speedup))
        # the worst benchmark shape's fraction of its attainable time; coloured as a pass once every shape is
        # close; "≥" while the roofline is provisional (no launch floor yet: the fraction is a lower bound)
        at_least = "≥" if view.summary.get("roofline_provisional") else ""
        roof = Text(f"{at_least}{view.roofline * 100:.0f}%" if view.roofline is not None and view.verdict == "passed"
                    else "", style=self._style("passed") if view.satisfied else "")
        if view.stale and view.state not in ("queued", "running"):
            age = Text("stale", style=self._style("stale"))
        else:
            age = Text(ago(now - view.finished) if view.finished else "", style=self._style("muted"))
        return state, Text(visible(view.id), no_wrap=True, overflow="ellipsis"), version, last, best, roof, age


def _tone(state: str) -> str:
    if state == "passed":
        return "passed"
    if state in ("failed", "crashed", "timed_out", "error"):
        return "failed"
    if state == "suspicious":
        return "suspicious"
    if state == "running":
        return "running"
    if state == "queued":
        return "queued"
    return "muted"
