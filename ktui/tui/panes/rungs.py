"""The ladder as a table: rung, status, key figures, failure message; Enter shows the traceback;
``/`` puts the cursor on the rows that hold a word.
Under a failed rung that judged an output wrong, its error map: where the output is wrong, in one
line and as a heatmap (``ktui.tui.heatmap``). A last row says ``weak test`` when the audit of the
reference says so; Enter shows why."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from ktui.protocol.errormap import NONFINITE, UNWRITTEN, WRONG, ErrorMap
from ktui.protocol.job import rung_family
from ktui.protocol.lines import key_figures, summary_line
from ktui.tui.heatmap import heatmap
from ktui.tui.searchable import RowSearch, Shown
from ktui.tui.state import KernelView
from ktui.tui.text import STATUS_LABELS, shown
from ktui.tui.view import PaneView


class RungsPane(RowSearch, Vertical):
    BORDER_TITLE = "2 rungs"
    BINDINGS = [Binding("enter", "toggle_traceback", "traceback")]
    COMPONENT_CLASSES = {"rungs-pane--ok", "rungs-pane--failed", "rungs-pane--muted", "rungs-pane--running",
                         "rungs-pane--map-wrong", "rungs-pane--map-nonfinite", "rungs-pane--map-unwritten",
                         "rungs-pane--map-axis"}

    view: reactive[PaneView | None] = reactive(None, always_update=True)
    expanded: reactive[bool] = reactive(False)
    _shown: tuple | None = None  # the (kernel, run, verdict) drawn last: a new one puts the cursor on its failure
    _cut: set[int] = set()  # the rows whose note was cut to QUIET_LINES: Enter shows it whole

    def compose(self):
        yield Shown(id="rungs-head")
        yield DataTable(id="rungs-table", cursor_type="row", zebra_stripes=False)
        with VerticalScroll(id="rung-detail-scroll"):
            yield Static(id="rung-map")
            yield Shown(id="rung-detail")

    def searched_table(self) -> DataTable:
        return self.query_one("#rungs-table", DataTable)

    @property
    def kernel(self) -> KernelView | None:
        return self.view.kernel if self.view is not None else None

    def watch_view(self, pane_view: PaneView | None) -> None:
        if pane_view is None:
            return
        view = pane_view.kernel
        self.query_one("#rungs-head", Static).update(_head(view))
        table = self.query_one("#rungs-table", DataTable)
        cursor = table.cursor_row
        rows = _rows(view)
        # Columns sized to the pane: the rung names and the status words whole, the figures get
        # the rest and wrap onto more lines rather than lose their tail (psnr, cossim).
        table.clear(columns=True)
        width = max(40, self.content_size.width or 80) - 2
        status_w = max([len("status"), *(len(self._status_text(r["status"])) for r in rows)])  # its header whole
        rung_w = min(max((len(r["rung"]) for r in rows), default=8), max(14, width * 2 // 5))
        figures_w = max(10, width - rung_w - status_w - 6)
        table.add_column("rung", key="rung", width=rung_w)
        table.add_column("status", key="status", width=status_w)
        table.add_column("figures / message", key="figures", width=figures_w)
        # Rows are found by position (see _selected), never by name: a history recorded before rung
        # names were unique (a shape listed twice) must still draw.
        self._cut = set()
        for index, record in enumerate(rows):
            rung, status, figures = self._cells(record)
            wrapped = figures.wrap(self.app.console, figures_w)
            # figures and a failure are shown whole; a passing rung's note gets QUIET_LINES at most, ending "…"
            note = not key_figures(record["rung"], record.get("figures") or {})
            if record["status"] in QUIET and note and len(wrapped) > QUIET_LINES:
                figures = cut_lines(wrapped, QUIET_LINES, figures_w)
                wrapped = wrapped[:QUIET_LINES]
                self._cut.add(index)
            lines = len(wrapped) or 1
            table.add_row(rung, status, figures, height=max(lines, len(rung.wrap(self.app.console, rung_w))))
        if table.row_count:
            shown = (view.id, view.run_id, view.verdict) if view else None
            failing = _first_failure(rows) if shown != self._shown else None
            row = failing if failing is not None else min(max(cursor, 0), table.row_count - 1)
            table.move_cursor(row=row)
            self._shown = shown
        self._show_detail()

    def watch_expanded(self, expanded: bool) -> None:
        self._show_detail()

    def action_toggle_traceback(self) -> None:
        self.expanded = not self.expanded

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # Enter on a row: the table's own binding, so the toggle is here
        self.action_toggle_traceback()

    def on_resize(self) -> None:
        if self.view is not None:
            self.view = self.view

    def selected_record(self) -> dict | None:
        """The rung under the cursor (``y`` copies its message)."""
        return self._selected()

    def _selected(self) -> dict | None:
        table = self.query_one("#rungs-table", DataTable)
        rows = _rows(self.kernel)
        if not rows or table.cursor_row < 0 or table.cursor_row >= len(rows):
            return None
        return rows[table.cursor_row]

    def _show_detail(self) -> None:
        detail = self.query_one("#rung-detail", Static)
        record = self._selected()
        cut = record is not None and self.query_one("#rungs-table", DataTable).cursor_row in self._cut
        text = _detail(record, self.expanded, self._cells(record)[2].plain if cut else "")
        detail.update(text)
        drawn = self._map(record)
        shown_map = self.query_one("#rung-map", Static)
        shown_map.update(drawn or "")
        shown_map.display = drawn is not None
        self.query_one("#rung-detail-scroll").display = bool(text.plain) or drawn is not None

    def _map(self, record: dict | None) -> Text | None:
        """The selected rung's error map, drawn in the room the pane leaves under the table; None
        where it has none."""
        if record is None or record["status"] in QUIET:
            return None
        found = ErrorMap.from_json((record.get("figures") or {}).get("error_map"))
        if found is None:
            return None
        size = self.content_size
        height = size.height or 24
        room = max(MAP_LINES[0], min(MAP_LINES[1], height - max(TABLE_KEPT, height * 2 // 5)))
        styles = {kind: self.get_component_rich_style(f"rungs-pane--map-{kind}", partial=True)
                  for kind in (WRONG, NONFINITE, UNWRITTEN, "axis")}
        return heatmap(found, max(30, (size.width or 80) - 2), room, styles)

    @staticmethod
    def _status_text(status: str) -> str:
        glyph, word = STATUS_LABELS.get(status, ("?", status))
        return f"{glyph} {word}"

    def _cells(self, record: dict) -> tuple[Text, Text, Text]:
        status = record["status"]
        tone = {"ok": "ok", "skipped": "muted", "running": "running"}.get(status, "failed")
        style = self.get_component_rich_style(f"rungs-pane--{tone}", partial=True)
        figures = " ".join(f"{k}={v}" for k, v in key_figures(record["rung"], record.get("figures") or {}))
        message = (record.get("message") or "").strip().splitlines()
        if status not in ("ok", "running") and message:
            figures = (figures + " — " if figures else "") + message[0]
        elif not figures and message:
            figures = message[0]
        # a shape's name may be long: it wraps after its commas rather than lose its end
        return (shown(Text(record["rung"].replace(",", ", "))), Text(self._status_text(status), style=style),
                shown(Text(figures)))


QUIET = ("ok", "skipped", "running")
QUIET_LINES = 2  # the most lines a passing, skipped or running rung's note takes in the table
MAP_LINES = (6, 20)  # the error map's fewest and most lines
TABLE_KEPT = 5  # lines of the pane left to its head, the table's header and rows, and the hint under the map
# (two fifths of a taller pane)
SKIPPED_RUN = 3  # this many skipped rungs in a row with one reason are one line


def _rows(view: KernelView | None) -> list[dict]:
    """The table's rows: the view's rungs, runs of skipped rungs with one reason folded into one
    row (``7 rungs skipped — compile failed``), and the rung in flight."""
    if view is None:
        return []
    rows: list[dict] = []
    for record in view.rungs:
        rows.append(record)
        tail = rows[-SKIPPED_RUN:]
        if (len(tail) == SKIPPED_RUN and all(r["status"] == "skipped" and r.get("message") == record.get("message")
                                             and not r.get("folded") for r in tail)):
            families = {rung_family(r["rung"]) for r in tail}
            del rows[-SKIPPED_RUN:]
            rows.append({**record, "rung": _folded(SKIPPED_RUN, families), "folded": SKIPPED_RUN,
                         "families": families, "figures": {}})
        elif (len(rows) >= 2 and rows[-2].get("folded") and record["status"] == "skipped"
              and rows[-2].get("message") == record.get("message")):
            rows.pop()
            n, families = rows[-1]["folded"] + 1, rows[-1]["families"] | {rung_family(record["rung"])}
            rows[-1] = {**rows[-1], "rung": _folded(n, families), "folded": n, "families": families}
    if view.state == "running" and view.rung:
        rows.append({"rung": view.rung, "status": "running", "figures": {}, "message": view.rung_note, "error": None})
    if view.weak_test:
        rows.append(_weak_test_row(view.weak_test))
    return rows


def _weak_test_row(reasons: tuple[str, ...]) -> dict:
    """The audit's verdict as a row: its first reason in short, every reason whole on Enter."""
    head = reasons[0].split(" — ")[0] if reasons[0] else "a trivial kernel passes this reference's test"
    return {"rung": "audit", "status": "weak", "figures": {}, "error": None,
            "message": "\n".join([head, *(r for r in reasons if r)]) + "\n(ktui audit REFERENCE --fresh audits it again)"}


def _folded(n: int, families: set[str]) -> str:
    """``benchmark ×3`` for three skipped benchmark shapes, ``7 rungs`` for a mix."""
    return f"{next(iter(families))} ×{n}" if len(families) == 1 else f"{n} rungs"


def _first_failure(rows: list[dict]) -> int | None:
    return next((i for i, r in enumerate(rows) if r["status"] not in QUIET), None)


def _head(view: KernelView | None) -> Text:
    if view is None:
        return Text("no kernel selected", style="dim")
    if view.version is None:
        return Text(view.problem or f"{view.id}: not run yet", style="dim")
    if view.state == "running" or not view.verdict:
        return Text(f"{view.id} v{view.version} running · {view.rung_progress()}")
    line = summary_line(view.id, view.version, view.verdict, view.summary, view.tier, view.arch, view.duration_s,
                        view.message)
    return Text(line.splitlines()[0], no_wrap=True, overflow="ellipsis")


def cut_lines(wrapped: list[Text], keep: int, width: int) -> Text:
    """The first ``keep`` of a cell's wrapped lines, the last ending with "…": a cut row says so."""
    last = wrapped[keep - 1].copy()
    last.rstrip()
    last.truncate(width - 1)
    last.append("…")
    return Text("\n").join([*wrapped[: keep - 1], last])


def _detail(record: dict | None, expanded: bool, whole: str = "") -> Text:
    """Under the table: a failure's message and traceback, or the whole of a note its row cut
    (``whole``), on Enter; a hint before."""
    if record is None:
        return Text("")
    error = record.get("error") or {}
    message = (record.get("message") or "").strip()
    if record["status"] in QUIET and not error:
        if not whole:
            return Text("")
        return Text(whole) if expanded else Text("enter: show the whole note", style="dim")
    if not expanded:
        extra = len(message.splitlines()) > 1 or error.get("traceback")
        what = "why" if record["status"] == "weak" else "the traceback"
        return Text(f"enter: show {what}" if extra else "", style="dim")
    out = Text()
    out.append(message + "\n", style="bold")
    loc = error.get("location")
    if loc:
        out.append(f"at {loc['file']}:{loc['line']}\n", style="italic")
    if error.get("traceback"):
        out.append(error["traceback"].rstrip())
    return out
