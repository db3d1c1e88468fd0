"""What the dashboard's keys do (``KtuiApp.BINDINGS`` names them): a mixin of actions.

Keys call the watch loop (re-run, profile), change what is shown (follow, diff base, panes) or
hand something to the user's tools (the editor, the clipboard).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from textual.app import SystemCommand
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import DataTable, TabbedContent

from ktui.protocol.visible import visible
from ktui.tui.editor import EditorError, failing_place, open_in_editor
from ktui.tui.help import HelpScreen
from ktui.tui.panes.history import HistoryPane
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.rungs import RungsPane
from ktui.tui.panes.sass_diff import SassPane
from ktui.tui.panes.status_bar import StatusBar
from ktui.tui.search_bar import SearchBar
from ktui.tui.searchable import Found, RowSearch, Searchable, TextPane
from ktui.tui.state import ProfileStatus

DIFF_BASES = ("previous", "best", "pinned")
NOTHING_TO_SEARCH = "nothing to search here: / n N search the kernel list, 1 compile, 2 rungs, 4 sass, 5 ncu, 6 output"


class DashboardActions:
    """Mixed into ``KtuiApp``: every ``action_*`` its bindings name, the help and the palette."""

    def notify(self, message: str, **kwargs) -> None:
        """Notices quote file names and tools' words: drawn as text with its control characters
        visible, never as markup."""
        kwargs["markup"] = False
        super().notify(visible(message), **kwargs)

    def action_rerun(self) -> None:
        if not self._can_run() or not self.selected:
            return
        if not self.loop.rerun(Path(self.state.kernels[self.selected].path)):
            self.notify(f"{self.selected}: the file is gone", severity="warning")

    def action_rerun_all(self) -> None:
        if self._can_run():
            count = self.loop.rerun_all()
            self.notify(f"queued {count} kernel(s)")

    def action_profile(self) -> None:
        if not self._can_run() or not self.selected:
            return
        self.state.profiles[self.selected] = ProfileStatus("queued behind the runs ahead of it", running=True)
        self.loop.run_task("profile", Path(self.state.kernels[self.selected].path))
        self._fill_panes()
        self.action_pane(5)

    def action_pin(self) -> None:
        view = self.state.kernels.get(self.selected) if self.selected else None
        if view is None or view.version is None:
            self.notify("no version to pin yet", severity="warning")
            return
        self.store.pin(view.id, view.version)
        self.diff_base = "pinned"
        self.notify(f"{view.id}: v{view.version} pinned as the diff baseline")

    def action_cycle_base(self) -> None:
        self.diff_base = DIFF_BASES[(DIFF_BASES.index(self.diff_base) + 1) % len(DIFF_BASES)]

    def watch_diff_base(self, base: str) -> None:
        if self.is_mounted and self.query(SassPane):
            self._fill_panes()

    def action_toggle_hot(self) -> None:
        """``h``: the SASS pane shows the selected version's hot lines, or the diff again."""
        self.query_one(SassPane).toggle_hot()
        self.action_pane(4)

    def action_toggle_roofline(self) -> None:
        """``o``: the history pane's versions on the GPU's roofline, or their speedup again."""
        self.query_one(HistoryPane).toggle_roofline()
        self.action_pane(3)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow

    def action_toggle_strict(self) -> None:
        """Strict applies to the runs that start from now on: the scheduler is handed new options
        (never the same object changed under it while its thread reads them)."""
        self.options = dataclasses.replace(self.options, strict=not self.options.strict)
        if self.loop is not None:
            self.loop.set_options(self.options)
        if self.is_mounted and self.query(StatusBar):
            self._fill_status()

    def watch_follow(self, follow: bool) -> None:
        if self.is_mounted and self.query(StatusBar):
            self._fill_status()

    def action_move(self, step: int) -> None:
        klist = self.query_one(KernelList)
        if klist.row_count:
            klist.move_cursor(row=max(0, min(klist.row_count - 1, klist.cursor_row + step)))

    def action_pane(self, number: int) -> None:
        if not self._wide:
            self.query_one(TabbedContent).active = f"tab-{number}"
        pane = self.query_one(f"#pane-{number}")
        target = pane if pane.can_focus else next((w for w in pane.query("*") if w.can_focus), None)
        if target is None:  # nothing to focus there: focus must not stay in a hidden tab
            self.screen.set_focus(None)
        else:
            target.focus()

    def action_edge(self, end: bool) -> None:
        """``g`` / ``G``: the top or the bottom of the focused pane (the first or last row of a table)."""
        widget = self.focused
        while widget is not None and not isinstance(widget, (DataTable, ScrollableContainer)):
            widget = widget.parent
        if isinstance(widget, DataTable):
            if widget.row_count:
                widget.move_cursor(row=widget.row_count - 1 if end else 0)
        elif widget is not None:
            widget.scroll_end(animate=False) if end else widget.scroll_home(animate=False)

    def action_search(self) -> None:
        """``/``: the search input, for the focused pane (at 80 columns: the tab in view); where it has
        nothing to search the input opens all the same, so what is typed next is never a key."""
        pane = self._searched_pane(say=False)
        self.query_one(SearchBar).open(pane, back_to=self.focused, nothing_here=NOTHING_TO_SEARCH)

    def on_search_bar_search(self, message: SearchBar.Search) -> None:
        if message.pane is None:
            self.notify(NOTHING_TO_SEARCH, severity="warning")
            return
        self.last_query = message.query
        if not message.query:
            message.pane.clear_search()
            self.notify("search cleared")
            return
        self._say(message.pane.search(message.query), message.query)

    def action_search_next(self, direction: int) -> None:
        """``n`` / ``N``; a pane not searched yet is searched for the last query (as in vim)."""
        pane = self._searched_pane()
        query = self.last_query
        if pane is None:
            return
        if not query:
            self.notify("no search yet: press / to search", severity="warning")
        elif pane.query_text != query:
            self._say(pane.search(query), query)
        else:
            self._say(pane.step(direction), query, stepped=direction)

    def _say(self, found: Found | None, query: str, stepped: int = 0) -> None:
        if found is None:
            self.notify(f"no match for '{query}'", severity="warning")
            return
        more = f" (the first {found.count} marked)" if found.more else ""
        if found.wrapped:
            end = "bottom" if stepped < 0 else "top"
            self.notify(f"search wrapped to the {end}: match {found.number}/{found.counted} for '{query}'{more}")
        elif not stepped:
            self.notify(f"match {found.number}/{found.counted} for '{query}'{more} · n next, N previous")

    def action_toggle_wrap(self) -> None:
        pane = self._focused_pane(TextPane)
        if pane is None:
            self.notify("no text pane here: w wraps the long lines of 1 compile, 4 sass, 5 ncu, 6 output",
                        severity="warning")
            return
        pane.wrap = not pane.wrap
        self.notify(f"{pane.BORDER_TITLE}: long lines {'wrap' if pane.wrap else 'cut at the edge'}")

    def _searched_pane(self, say: bool = True) -> Searchable | None:
        """The pane ``/``, ``n`` and ``N`` work in: the focused one if it can be searched."""
        pane = self._focused_pane((TextPane, RowSearch))
        if pane is None and say:
            self.notify(NOTHING_TO_SEARCH, severity="warning")
        return pane

    def _focused_pane(self, kinds):
        """The pane of ``kinds`` the focus is in. At 80 columns the tab in view comes before the
        kernel list above it: the list keeps the focus while its kernel's tabs are read."""
        widget = self.focused
        while widget is not None and not isinstance(widget, kinds):
            widget = widget.parent
        if (widget is None or isinstance(widget, KernelList)) and not self._wide and self.query(TabbedContent):
            active = self.query_one(TabbedContent).active_pane
            in_tab = next((w for w in active.query("*") if isinstance(w, kinds)), None) if active is not None else None
            widget = in_tab or widget
        return widget

    def action_focus_list(self) -> None:
        self.query_one(KernelList).focus()

    def action_edit(self) -> None:
        view = self.state.kernels.get(self.selected) if self.selected else None
        if view is None:
            return
        file, line = failing_place(view)
        sass = self.query_one(SassPane) if self.query(SassPane) else None
        if line == 1 and file == view.path and sass is not None and sass.hot_mode and sass.hot_lines:
            line = sass.hot_lines[0]  # no failure to go to: the hottest line
        try:
            how = open_in_editor(self, file, line)
        except EditorError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.notify(f"opened {file}:{line} {how}")

    def action_copy(self) -> None:
        view = self.state.kernels.get(self.selected) if self.selected else None
        if view is None:
            return
        rung = self.query_one(RungsPane).selected_record() if self.query(RungsPane) else None
        text, what = ((rung["message"], f"the message of {rung['rung']}") if rung and rung.get("message")
                      else (view.run_dir, "the run folder") if view.run_dir else ("", ""))
        if not text:
            self.notify("nothing to copy yet", severity="warning")
            return
        self.copy_to_clipboard(text)
        self.notify(f"copied {what}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self._key_help()))

    def _can_run(self) -> bool:
        if self.loop is None:
            self.notify("not watching: this dashboard only shows stored results", severity="warning")
            return False
        return True

    def _key_help(self) -> list[tuple[str, str]]:
        """The live key map, for the help screen."""
        rows = []
        for binding in self.BINDINGS:
            if isinstance(binding, Binding) and binding.tooltip:
                rows.append((binding.key_display or binding.key, binding.tooltip))
        rows.append(("enter", "rungs pane: show/hide the traceback of the selected rung"))
        rows.append(("ctrl+p", "command palette"))
        return rows

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """ktui's commands only, and a jump to each kernel by name."""
        for kernel_id in sorted(self.state.kernels):
            yield SystemCommand(f"Go to {kernel_id}", "Select this kernel", lambda k=kernel_id: self._select(k))
        yield SystemCommand("Open in editor", "The failing file:line, or the kernel (e)", self.action_edit)
        yield SystemCommand("Copy", "The selected rung's message, or the run folder (y)", self.action_copy)
        yield SystemCommand("Re-run kernel", "Run the selected kernel again (r)", self.action_rerun)
        yield SystemCommand("Re-run all", "Queue every kernel (R)", self.action_rerun_all)
        yield SystemCommand("Profile with ncu", "Nsight Compute profile of the selected kernel (p)", self.action_profile)
        yield SystemCommand("Pin diff baseline", "Pin the current version as the SASS diff base (b)", self.action_pin)
        yield SystemCommand("Cycle diff base", "previous / best / pinned (d)", self.action_cycle_base)
        yield SystemCommand("Hot lines", "The version's source with per-line SASS and ncu figures, or the diff (h)",
                            self.action_toggle_hot)
        yield SystemCommand("Roofline", "The versions' benchmark shapes on the GPU's roofline, or the speedup history (o)",
                            self.action_toggle_roofline)
        yield SystemCommand("Toggle follow", "Select the kernel saved last (f)", self.action_toggle_follow)
        yield SystemCommand("Toggle strict", "Fresh process, more seeds, every timed output re-checked (s)",
                            self.action_toggle_strict)
        yield SystemCommand("Key help", "All keys (?)", self.action_help)
