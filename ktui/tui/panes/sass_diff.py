"""SASS diff: the selected version's machine code against a base (previous, best or pinned).

The diff itself is ``ktui.history.sassdiff`` (normalised listings, opcode and resource deltas); this pane
only draws it: the facts per function first, then the unified diff, ``+``/``-`` coloured. The diff
is computed in a thread so a large listing never stalls the keys. ``h`` switches to the version's
hot lines (``panes/hotspots.py``) and back.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.reactive import reactive
from textual.widgets import Static

from ktui.history.sassdiff import DiffError, diff_versions, function_facts, resolve_base
from ktui.history.store import Store
from ktui.protocol.statedir import run_dir
from ktui.tui.panes.hotspots import hot_renderables
from ktui.tui.searchable import PaneText, TextPane
from ktui.tui.state import KernelView
from ktui.tui.view import PaneView
from ktui.workspace.kernels import state_dir

MAX_DIFF_LINES = 2000  # beyond this the pane says where the full diff is (ktui diff)


class SassPane(TextPane):
    BORDER_TITLE = "4 sass diff"
    hot_mode = False  # ``h``: the selected version's hot lines instead of the diff (panes/hotspots.py)
    hot_lines: list[int] = []  # the lines highlighted in that mode, hottest first (``e`` opens the first)
    _shown = 0  # counts drawings begun: a thread's result for an earlier one is dropped, not drawn late
    view: reactive[PaneView | None] = reactive(None, always_update=True)
    _drawn: tuple | None = None  # what the last drawing was of: the diff is redone only when it changes

    def compose(self):
        yield PaneText(id="sass-head")
        yield PaneText(id="sass-body")

    def watch_view(self, pane_view: PaneView | None) -> None:
        if pane_view is None:
            return
        drawing = (pane_view.version_key, pane_view.diff_base, self.hot_mode)
        if drawing != self._drawn:
            self._drawn = drawing
            self._draw(pane_view.root, pane_view.store, pane_view.kernel, pane_view.diff_base)

    def toggle_hot(self) -> None:
        """``h``: the version's hot lines, or the diff again."""
        self.hot_mode = not self.hot_mode
        self.border_title = "4 hot lines" if self.hot_mode else self.BORDER_TITLE
        self.view = self.view

    def _draw(self, root: Path, store: Store, view: KernelView | None, base: str) -> None:
        self._shown += 1
        head = self.query_one("#sass-head", Static)
        body = self.query_one("#sass-body", Static)
        if view is None:
            head.update(Text("no kernel selected", style="dim"))
            body.update("")
            return
        if view.version is None or (view.state == "running" and not view.find_rung("dumps")):
            head.update(Text(f"base: {base} · waiting for this version's SASS", style="dim"))
            body.update("")
            return
        if self.hot_mode:
            self._hot(run_dir(state_dir(root), view.id, view.version), view.version, self._shown)
            return
        self._diff(root, store.path, view.id, view.version, base, self._shown)

    @work(thread=True, exclusive=True, group="sass")
    def _hot(self, folder: Path, version: int, shown: int) -> None:
        try:
            head, body, lines = hot_renderables(folder, version)
        except Exception as exc:
            head, body, lines = Text(f"the hot lines failed: {exc!r}", style="bold red"), Text(""), []
        self.app.call_from_thread(self._put, head, body, shown, lines)

    @work(thread=True, exclusive=True, group="sass")
    def _diff(self, root: Path, db: Path, kernel: str, version: int, base: str, shown: int) -> None:
        try:
            head, body = sass_renderables(root, db, kernel, version, base)
        except Exception as exc:
            head, body = Text(f"the SASS diff failed: {exc!r}", style="bold red"), Text("")
        self.app.call_from_thread(self._put, head, body, shown, [])

    def _put(self, head: RenderableType, body: RenderableType, shown: int, hot_lines: list[int]) -> None:
        if shown != self._shown:  # a later show (another kernel, the other mode) owns the pane now
            return
        self.hot_lines = hot_lines
        self.query_one("#sass-head", Static).update(head)
        self.query_one("#sass-body", Static).update(body)


def sass_renderables(root: Path, db: Path, kernel: str, version: int, base: str) -> tuple[RenderableType, RenderableType]:
    """(header, body) for the pane; a missing base or missing SASS is a sentence, not an error."""

    store = Store(db)  # this thread's own connection
    try:
        try:
            base_version = resolve_base(store, kernel, version, base)
        except DiffError as exc:
            return (Text(f"base: {base} · d cycles previous/best/pinned, b pins v{version}", style="dim"),
                    Text(_short_paths(exc.in_dashboard(), root)))
        try:
            diff = diff_versions(state_dir(root), kernel, base_version, version)
        except DiffError as exc:
            return Text(f"v{base_version} ({base}) → v{version}", style="bold"), Text(_short_paths(exc.in_dashboard(), root))
    finally:
        store.close()
    head = Text()
    head.append(f"SASS v{diff.base_version} ({base}) → v{diff.new_version}", style="bold")
    if all(f.status == "same" for f in diff.functions):
        head.append(" · identical after normalisation")
    parts: list[RenderableType] = []
    shown = 0
    for f in diff.functions:
        facts = function_facts(f)
        parts.append(Text(facts[0], style="bold"))
        parts.extend(Text(line) for line in facts[1:])
        for line in f.unified:
            if shown >= MAX_DIFF_LINES:
                break
            parts.append(_diff_line(line))
            shown += 1
    total = sum(len(f.unified) for f in diff.functions)
    if total > shown:
        parts.append(Text(f"… {total - shown} more diff lines: ktui diff {kernel} --base {diff.base_version}", style="dim"))
    return head, Group(*parts)


def _short_paths(message: str, root: Path) -> str:
    """Paths inside the workspace as the user sees them (relative to its root)."""
    return message.replace(str(root) + "/", "")


def _diff_line(line: str) -> Text:
    if line.startswith("+") and not line.startswith("+++"):
        return Text(line, style="green", no_wrap=True, overflow="ellipsis")
    if line.startswith("-") and not line.startswith("---"):
        return Text(line, style="red", no_wrap=True, overflow="ellipsis")
    if line.startswith("@@"):
        return Text(line, style="cyan", no_wrap=True, overflow="ellipsis")
    return Text(line, style="dim", no_wrap=True, overflow="ellipsis")
