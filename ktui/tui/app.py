"""``ktui watch``: the dashboard. It draws what the watch loop reports; it runs no user code.

Data flows one way: the watch loop (threads) → ``LoopItem`` messages → ``DashboardState`` →
attributes set on the panes. Panes send messages up (a kernel was highlighted); keys call the
loop (re-run, profile) or change what is shown (follow, diff base). At 80 columns the panes share
one tabbed area under the kernel list; from ``WIDE`` columns on they sit side by side.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable, Iterable

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, TabbedContent, TabPane

from ktui.history.store import Store
from ktui.protocol.events import Event, Output, RunFinished
from ktui.protocol.job import Options
from ktui.tui.help import HelpScreen
from ktui.tui.panes.compile_errors import CompilePane
from ktui.tui.panes.history import HistoryPane
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.ncu import NcuPane
from ktui.tui.panes.rungs import RungsPane
from ktui.tui.panes.sass_diff import SassPane
from ktui.tui.panes.status_bar import StatusBar, StatusInfo
from ktui.tui.state import DashboardState, ProfileStatus, version_history
from ktui.watch.loop import Saved, WatchLoop, WatchSettings
from ktui.watch.scheduler import Notice
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import state_dir

WIDE = 120  # columns from which the panes sit side by side
PANES = ((1, "compile"), (2, "rungs"), (3, "history"), (4, "sass"), (5, "ncu"))
DIFF_BASES = ("previous", "best", "pinned")
AGE_REFRESH_S = 5.0
PANE_REFRESH_S = 0.05


class LoopItem(Message):
    """An event or notice from the watch loop, carried onto the UI thread."""

    def __init__(self, item: Event | Notice) -> None:
        super().__init__()
        self.item = item


class Dashboard(Container):
    """The kernel list and the five panes, laid out for the terminal's width."""

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
            1: CompilePane(self.root, id="pane-1", classes="pane"),
            2: RungsPane(id="pane-2", classes="pane"),
            3: HistoryPane(id="pane-3", classes="pane"),
            4: SassPane(id="pane-4", classes="pane"),
            5: NcuPane(id="pane-5", classes="pane"),
        }


class KtuiApp(App[int]):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses elsewhere keep the styles
    TITLE = "ktui"
    BINDINGS = [
        Binding("r", "rerun", "rerun", tooltip="re-run the selected kernel (cancels its run in flight)"),
        Binding("R", "rerun_all", "all", tooltip="re-run every kernel, one after another"),
        Binding("p", "profile", "ncu", tooltip="profile the selected kernel with Nsight Compute (GPU)"),
        Binding("b", "pin", "pin", tooltip="pin the selected version as the SASS diff baseline"),
        Binding("d", "cycle_base", "base", tooltip="SASS diff base: previous passing / best / pinned"),
        Binding("f", "toggle_follow", "follow", tooltip="follow mode: select the kernel saved last"),
        Binding("s", "toggle_strict", "strict",
                tooltip="strict mode: a fresh process per run, 3 seeds per shape, every timed output re-checked"),
        Binding("j", "move(1)", "down", show=False, tooltip="next kernel (or the down arrow)"),
        Binding("k", "move(-1)", "up", show=False, tooltip="previous kernel (or the up arrow)"),
        Binding("1", "pane(1)", "panes", key_display="1-5",
                tooltip="jump to a pane: 1 compile, 2 rungs, 3 history, 4 sass, 5 ncu"),
        *(Binding(str(n), f"pane({n})", name, show=False) for n, name in PANES[1:]),
        Binding("escape", "focus_list", "list", show=False, tooltip="back to the kernel list"),
        Binding("question_mark", "help", "help", key_display="?", tooltip="this help"),
        Binding("q", "quit", "quit", tooltip="quit (cancels the run in flight)"),
    ]

    follow: reactive[bool] = reactive(True)
    diff_base: reactive[str] = reactive("previous")

    def __init__(
        self,
        workspace: Workspace,
        options: Options | None = None,
        settings: WatchSettings | None = None,
        live: bool = True,
        clock: Callable[[], float] = time.time,
    ):
        super().__init__()
        self.workspace = workspace
        self.options = options or Options()
        self.settings = settings or WatchSettings()
        self.live = live
        self.clock = clock
        self.loop: WatchLoop | None = None
        self.store = Store.of(state_dir(workspace.root))
        self.state = DashboardState(root=workspace.root)
        self.selected: str | None = None
        self._wide: bool | None = None
        self._pane_timer = None

    # -- building ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        self._wide = self.size.width >= WIDE
        yield Dashboard(self.workspace.root, self._wide, id="dashboard")
        yield StatusBar(id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.state.load(self.store, self.workspace.kernels())
        self.state.note = self.workspace.problem()
        if self.state.kernels:
            self.selected = next(iter(self.state.kernels))
        self._fill_all()
        self.query_one(KernelList).focus()
        self.set_interval(AGE_REFRESH_S, self._refresh_ages)
        if self.live:
            self.loop = WatchLoop(self.workspace, self.options, self._from_loop, self.settings, tasks=self._tasks())
            self.loop.start()

    def _tasks(self) -> dict:
        from ktui.tui.profile_task import profile_task

        return {"profile": profile_task}

    async def on_resize(self, event) -> None:
        wide = event.size.width >= WIDE
        if self._wide is None or wide == self._wide:
            return
        self._wide = wide
        dashboard = self.query_one(Dashboard)
        dashboard.wide = wide
        await dashboard.recompose()
        self._fill_all()
        self.query_one(KernelList).focus()

    def on_unmount(self) -> None:
        if self.loop is not None:
            self.loop.close()
            self.loop = None
        self.store.close()

    # -- the loop's thread → this thread --------------------------------------------------------
    def _from_loop(self, item: Event | Notice) -> None:
        if isinstance(item, Output):
            return  # printed text is for ``ktui run -v``; drawing it per line would only cost CPU
        self.post_message(LoopItem(item))

    def on_loop_item(self, message: LoopItem) -> None:
        if not self._panes_alive():
            return
        item = message.item
        if isinstance(item, Saved):
            self._saved(item)
        changed = self.state.apply(item)
        klist = self.query_one(KernelList)
        now = self.clock()
        for kernel_id in changed - {""}:
            view = self.state.kernels.get(kernel_id)
            if view is not None:
                klist.update_view(view, now)
        if self.selected in changed and isinstance(item, RunFinished):
            self._panes_now()  # the verdict is what the user waits for: no coalescing delay
        elif self.selected in changed:
            self._panes_later()
        if changed:
            self._fill_status()

    def _panes_later(self) -> None:
        """Redraw the selected kernel's panes once per burst of events, not once per event:
        a run emits dozens within milliseconds, and the list row (drawn at once) is what must
        change first."""
        if self._pane_timer is None:
            self._pane_timer = self.set_timer(PANE_REFRESH_S, self._flush_panes)

    def _panes_now(self) -> None:
        """Redraw the selected kernel's panes, history included, at once (a run just finished)."""
        if self._pane_timer is not None:
            self._pane_timer.stop()
        self._pane_timer = None
        if self._panes_alive():
            self._fill_panes(history=True)

    def _flush_panes(self) -> None:
        self._pane_timer = None
        if self._panes_alive():
            self._fill_panes()

    def _panes_alive(self) -> bool:
        """False while the app closes: the loop's thread may still deliver its last messages."""
        return bool(self.query(KernelList))

    def _saved(self, item: Saved) -> None:
        """New kernel files join the list, removed ones leave it; follow mode jumps to the save."""
        if item.content_hash is None and not item.dependency:
            gone = [v.id for v in self.state.kernels.values() if v.path == item.path]
            for kernel_id in gone:
                self.state.remove(kernel_id)
            if self.selected in gone:
                self.selected = next(iter(self.state.kernels), None)
            if gone:
                self.state.note = self.workspace.problem()
                self._fill_all()
            return
        added = False
        for kernel_id in item.kernels:
            if kernel_id not in self.state.kernels:
                kernel = self.workspace.kernel(Path(item.path)) if not item.dependency else None
                if kernel is not None and kernel.id == kernel_id:
                    self.state.add_kernel(kernel, self.store)
                    added = True
        if added:
            self.state.note = self.workspace.problem()
            self.query_one(KernelList).show(list(self.state.kernels.values()), self.clock())
        if self.follow and item.kernels and not item.dependency:
            self._select(item.kernels[0])

    # -- filling panes (attributes down) -------------------------------------------------------
    def _fill_all(self) -> None:
        klist = self.query_one(KernelList)
        klist.show(list(self.state.kernels.values()), self.clock())
        if self.selected:
            klist.select(self.selected)
        self._fill_panes(history=True)
        self._fill_status()

    def _fill_panes(self, history: bool = False) -> None:
        view = self.state.kernels.get(self.selected) if self.selected else None
        self.query_one(CompilePane).view = view
        self.query_one(RungsPane).view = view
        if history:
            self.query_one(HistoryPane).points = version_history(self.store, self.selected) if self.selected else []
            self._fill_sass(view)
        self._fill_ncu(view)

    def _fill_sass(self, view) -> None:
        self.query_one(SassPane).show(self.workspace.root, self.store, view, self.diff_base)

    def _fill_ncu(self, view) -> None:
        self.query_one(NcuPane).show(self.workspace.root, view, self.state.profiles.get(view.id) if view else None,
                                     self.clock())

    def _fill_status(self) -> None:
        view = self.state.kernels.get(self.selected) if self.selected else None
        stale = ""
        if view is not None and view.stale:
            what = "the kernel file" if view.content_hash != view.disk_hash else "its reference"
            stale = f"results of v{view.version} predate {what} on disk"
        queue = self.state.queue
        running = self.state.kernels.get(queue.running) if queue.running else None
        self.query_one(StatusBar).info = StatusInfo(
            tier=self.state.tier, device=self.state.device, arch=self.state.arch,
            running=queue.running, running_rung=running.rung_progress() if running else "",
            queued=len(queue.queued), cancelling=queue.cancelling,
            watcher=self.state.watcher if self.live else "off (viewer)", watcher_reason=self.state.watcher_reason,
            follow=self.follow, strict=self.options.strict, stale=stale, note=self.state.note or self.state.problem,
            activity=self.state.activity(),
        )

    def _refresh_ages(self) -> None:
        klist = self.query_one(KernelList)
        now = self.clock()
        for view in self.state.kernels.values():
            klist.update_view(view, now)

    def _select(self, kernel_id: str) -> None:
        if kernel_id not in self.state.kernels:
            return
        self.query_one(KernelList).select(kernel_id)
        if kernel_id != self.selected:
            self.selected = kernel_id
            self._fill_panes(history=True)
            self._fill_status()

    @on(KernelList.Selected)
    def _highlighted(self, message: KernelList.Selected) -> None:
        if message.kernel_id != self.selected:
            self.selected = message.kernel_id
            self._fill_panes(history=True)
            self._fill_status()

    # -- keys ----------------------------------------------------------------------------------
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
        self._fill_ncu(self.state.kernels.get(self.selected))
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
            self._fill_sass(self.state.kernels.get(self.selected) if self.selected else None)

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
        target = pane if pane.can_focus else next((w for w in pane.query("*") if w.can_focus), pane)
        target.focus()

    def action_focus_list(self) -> None:
        self.query_one(KernelList).focus()

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
        yield from super().get_system_commands(screen)
        yield SystemCommand("Re-run kernel", "Run the selected kernel again (r)", self.action_rerun)
        yield SystemCommand("Re-run all", "Queue every kernel (R)", self.action_rerun_all)
        yield SystemCommand("Profile with ncu", "Nsight Compute profile of the selected kernel (p)", self.action_profile)
        yield SystemCommand("Pin diff baseline", "Pin the current version as the SASS diff base (b)", self.action_pin)
        yield SystemCommand("Cycle diff base", "previous / best / pinned (d)", self.action_cycle_base)
        yield SystemCommand("Toggle follow", "Select the kernel saved last (f)", self.action_toggle_follow)
        yield SystemCommand("Toggle strict", "Fresh process, more seeds, every timed output re-checked (s)",
                            self.action_toggle_strict)
        yield SystemCommand("Key help", "All keys (?)", self.action_help)


def run_dashboard(workspace: Workspace, options: Options, settings: WatchSettings) -> int:
    app = KtuiApp(workspace, options, settings)
    app.run()
    return app.return_code or 0
