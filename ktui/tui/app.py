"""``ktui watch``: the dashboard. It draws what the watch loop reports; it runs no user code.

Data flows one way: the watch loop (threads) → ``WatchItem`` messages → ``DashboardState`` →
attributes set on the panes. Panes send messages up (a kernel was highlighted); keys call the
loop (re-run, profile) or change what is shown (follow, diff base). At 80 columns the panes share
one tabbed area under the kernel list; from ``WIDE`` columns on they sit side by side.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Callable

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import TabbedContent

from ktui.dispatch.owner import OwnerGone, OwnerLink, Refused
from ktui.dispatch.runner import Runner
from ktui.history.store import Store
from ktui.protocol.events import Event, Output, RunFinished
from ktui.protocol.job import Options
from ktui.protocol.notices import Notice, Saved
from ktui.protocol.processes import stopped_by
from ktui.tui.actions import DashboardActions
from ktui.tui.dashboard import PANES, WIDE, Dashboard
from ktui.tui.key_bar import KeyBar
from ktui.tui.panes.kernel_list import KernelList
from ktui.tui.panes.status_bar import StatusBar, StatusInfo
from ktui.tui.search_bar import SearchBar
from ktui.tui.state import DashboardState
from ktui.tui.stop_watchdog import exit_when_stuck
from ktui.tui.versions import version_history
from ktui.tui.view import PaneView
from ktui.watch.loop import WatchLoop, WatchSettings
from ktui.watch.profile_task import profile_task
from ktui.watch.view import WatchView
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import state_dir

DIFF_BASES = ("previous", "best", "pinned")
AGE_REFRESH_S = 5.0
PANE_REFRESH_S = 0.05


class PrintedLines(Message):
    """Printed lines are waiting in the app's queue (see ``KtuiApp._from_watch``)."""


class WatchItem(Message):
    """An event or notice from the watch loop, carried onto the UI thread."""

    def __init__(self, item: Event | Notice) -> None:
        super().__init__()
        self.item = item


class KtuiApp(DashboardActions, App[int]):
    CSS_PATH = Path(__file__).parent / "app.tcss"  # absolute: subclasses elsewhere keep the styles
    TITLE = "ktui"
    BINDINGS = [
        Binding("r", "rerun", "rerun", tooltip="re-run the selected kernel (cancels its run in flight)"),
        Binding("R", "rerun_all", "all", tooltip="re-run every kernel, one after another"),
        Binding("p", "profile", "ncu", tooltip="profile the selected kernel with Nsight Compute (GPU)"),
        Binding("b", "pin", "pin", tooltip="pin the selected version as the SASS diff baseline"),
        Binding("d", "cycle_base", "base", tooltip="SASS diff base: previous passing / best / pinned"),
        Binding("h", "toggle_hot", "hot", show=False,
                tooltip="SASS pane: the version's source with per-line instructions and ncu samples, or the diff"),
        Binding("o", "toggle_roofline", "roofline", show=False,
                tooltip="history pane: each version's benchmark shapes on the GPU's roofline, or the speedup history"),
        Binding("f", "toggle_follow", "follow", tooltip="follow mode: select the kernel saved last"),
        Binding("s", "toggle_strict", "strict",
                tooltip="strict mode: a fresh process per run, 3 seeds per shape, every timed output re-checked"),
        Binding("slash", "search", "search", key_display="/",
                tooltip="search the focused pane: its text, or the rows of the kernel list and the rungs "
                        "(case-sensitive only with a capital letter)"),
        Binding("n", "search_next(1)", "next", show=False, tooltip="the next match of the search (wraps around)"),
        Binding("N", "search_next(-1)", "previous", show=False, tooltip="the previous match of the search (wraps around)"),
        Binding("w", "toggle_wrap", "wrap", tooltip="wrap the long lines of the focused text pane, or cut them"),
        Binding("j", "move(1)", "down", show=False, tooltip="next kernel (or the down arrow)"),
        Binding("k", "move(-1)", "up", show=False, tooltip="previous kernel (or the up arrow)"),
        Binding("1", "pane(1)", "panes", key_display="1-6",
                tooltip="jump to a pane: 1 compile, 2 rungs, 3 history, 4 sass, 5 ncu, 6 output"),
        *(Binding(str(n), f"pane({n})", name, show=False) for n, name in PANES[1:]),
        Binding("e", "edit", "edit", show=False, tooltip="open the failing file:line in $VISUAL/$EDITOR (a tmux split in tmux); in hot lines (h), the hottest line"),
        Binding("y", "copy", "copy", show=False, tooltip="copy the selected rung's message, or the run folder's path"),
        Binding("g", "edge(False)", "top", show=False, tooltip="the top of the focused pane (the first row of a table)"),
        Binding("G", "edge(True)", "bottom", show=False, tooltip="the bottom of the focused pane (the last row of a table)"),
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
        runners: list[Runner] | None = None,  # None: a local worker; one per GPU, or a RemoteRunner for ``--remote``
        link: OwnerLink | None = None,  # the workspace's daemon: this dashboard is a view of its watch
    ):
        super().__init__()
        self.runners = runners
        self.runner = runners[0] if runners else None
        self.link = link
        self.workspace = workspace
        self.options = options or Options()
        self.settings = settings or WatchSettings()
        self.live = live
        self.clock = clock
        self.loop: WatchLoop | WatchView | None = None
        self.store = Store.of(state_dir(workspace.root))
        self.state = DashboardState(root=workspace.root)
        self.selected: str | None = None
        self.last_query = ""  # n / N in a pane not searched yet look for it
        self._wide: bool | None = None
        self._pane_timer = None
        self._printed: list[tuple[str, str]] = []
        self._printed_lock = threading.Lock()
        self._printed_posted = False
        self._stop_reason: str | None = None  # set when a signal stops the dashboard
        self._cleaned = threading.Event()  # set once the loop is closed and the history too
        self._pane_view: PaneView | None = None  # the last view given to the panes

    # -- building ------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        self._wide = self.size.width >= WIDE
        yield Dashboard(self.workspace.root, self._wide, id="dashboard")
        yield SearchBar(id="search")
        yield StatusBar(id="status")
        yield KeyBar(self.BINDINGS, id="keys")

    def on_mount(self) -> None:
        self.state.load(self.store, self.workspace.kernels())
        self.state.note = self.workspace.problem()
        if self.state.kernels:
            self.selected = next(iter(self.state.kernels))
        self._fill_all()
        self.query_one(KernelList).focus()
        self.set_interval(AGE_REFRESH_S, self._refresh_ages)
        if self.live:
            if self.link is not None:
                self.loop = WatchView(self.link, self.workspace, self.options, self._from_watch, self.settings)
            else:
                self.loop = WatchLoop(self.workspace, self.options, self._from_watch, self.settings,
                                      tasks={"profile": profile_task}, runners=self.runners)
            try:
                self.loop.start()
            except (OwnerGone, Refused) as exc:  # the daemon went away since ``ktui watch`` found it
                self.loop = None
                self.notify(f"not watching: {exc}", severity="error", timeout=30)
            self._stop_on_signals()

    def _stop_on_signals(self) -> None:
        """SIGTERM or SIGHUP (its terminal closed) ends the dashboard as ``q`` does, the run in
        flight recorded ``cancelled`` with what stopped it, not left ``running``."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, self._stopped_by, sig)

    def _stopped_by(self, signum: int) -> None:
        if self._stop_reason is None:  # a second signal changes nothing
            exit_when_stuck(self._cleaned, 128 + signum)
        self._stop_reason = self._stop_reason or f"{stopped_by(signum)}: the dashboard is stopping"
        self.exit(return_code=128 + signum)

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
            self.loop.close(*(() if self._stop_reason is None else (self._stop_reason,)))
            self.loop = None
        self.store.close()
        self._cleaned.set()

    # -- the loop's thread → this thread --------------------------------------------------------
    def _from_watch(self, item: Event | Notice) -> None:
        if isinstance(item, Output):
            # printed lines come in bursts: they queue here and reach the UI thread one batch
            # per message, so a kernel printing thousands of lines costs one redraw, not thousands
            with self._printed_lock:
                self._printed.append((item.run_id, item.text))
                if self._printed_posted:
                    return
                self._printed_posted = True
            self.post_message(PrintedLines())
            return
        self.post_message(WatchItem(item))

    def on_printed_lines(self, _message: PrintedLines) -> None:
        with self._printed_lock:
            batch, self._printed, self._printed_posted = self._printed, [], False
        if not self._panes_alive():
            return
        by_run: dict[str, list[str]] = {}
        for run_id, text in batch:
            by_run.setdefault(run_id, []).append(text)
        changed = set().union(*(self.state.add_output(run_id, lines) for run_id, lines in by_run.items()))
        if self.selected in changed:
            self._panes_later()

    def on_watch_item(self, message: WatchItem) -> None:
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
            self._bring_failure_forward(self.state.kernels.get(self.selected))
        elif self.selected in changed:
            self._panes_later()
        if changed:
            self._fill_status()

    def _bring_failure_forward(self, view) -> None:
        """At 80 columns one pane shows at a time: after a failure past compile, the rungs pane
        (where the failing rung is, under the cursor) replaces a compile pane that would say
        "compiled cleanly"."""
        if self._wide or view is None or view.verdict in ("passed", "cancelled", "") or not self.query(TabbedContent):
            return
        tabs = self.query_one(TabbedContent)
        compile_failed = any(r["rung"] == "compile" and r["status"] != "ok" for r in view.rungs)
        if tabs.active == "tab-1" and not compile_failed:
            tabs.active = "tab-2"

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
        """One ``PaneView`` for every pane that follows the selected version; the versions are
        read from the history only when asked (a run finished, another kernel selected)."""
        kernel = self.state.kernels.get(self.selected) if self.selected else None
        last = self._pane_view
        same_kernel = last is not None and last.kernel is not None and kernel is not None and last.kernel.id == kernel.id
        points = last.points if (not history and same_kernel) else (
            tuple(version_history(self.store, self.selected)) if self.selected else ())
        self._pane_view = PaneView(
            kernel=kernel, root=self.workspace.root, store=self.store, now=self.clock(),
            profile=self.state.profiles.get(kernel.id) if kernel is not None else None,
            diff_base=self.diff_base, points=points)
        for pane in self.query(".pane"):  # the six panes (dashboard.py)
            pane.view = self._pane_view

    def _fill_status(self) -> None:
        view = self.state.kernels.get(self.selected) if self.selected else None
        stale = ""
        if view is not None and view.stale:
            what = "the kernel file" if view.content_hash != view.disk_hash else "its reference"
            stale = f"results of v{view.version} predate {what} on disk"
        queue = self.state.queue
        running = self.state.kernels.get(queue.running) if queue.running else None
        self.query_one(StatusBar).info = StatusInfo(
            tier=self.state.tier, device=self.state.device, arch=self.state.arch, gpus=self.state.gpus,
            running=queue.running, running_rung=running.rung_progress() if running else "",
            queued=len(queue.queued), cancelling=queue.cancelling,
            watcher=self.state.watcher if self.live else "off (viewer)", watcher_reason=self.state.watcher_reason,
            follow=self.follow, strict=self.options.strict, stale=stale, note=self.state.note or self.state.problem,
            activity=self.state.activity(), remote=_remote_text(self.runner),
            weak_test=view.weak_test if view is not None else (), unconfined=self.state.unconfined,
        )

    def _refresh_ages(self) -> None:
        if not self._panes_alive():  # the timer may fire while the app closes
            return
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


def _remote_text(runner) -> str:
    """``remote gpu1 · up`` for a remote runner (its host and the link's state), else nothing."""
    host = getattr(runner, "host", None)
    return f"remote {host} · {runner.link_state()}" if host else ""


def run_dashboard(workspace: Workspace, options: Options, settings: WatchSettings, runners: list[Runner] | None = None,
                  link: OwnerLink | None = None) -> int:
    """The dashboard on a watch of its own (``runners``) or as a view of the workspace's daemon (``link``)."""
    app = KtuiApp(workspace, options, settings, runners=runners, link=link)
    app.run()
    return app.return_code or 0
