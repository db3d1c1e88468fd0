"""ncu summary: the newest Nsight Compute profile of the selected kernel, its age, and whether
the kernel has changed since (stale). ``p`` starts a profile; its progress shows here."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ktui.profiling import ncu
from ktui.tui.searchable import PaneText, TextPane
from ktui.tui.state import KernelView, ProfileStatus
from ktui.tui.text import ago
from ktui.tui.view import PaneView
from ktui.workspace.kernels import state_dir


class NcuPane(TextPane):
    BORDER_TITLE = "5 ncu"
    WRAPS = True  # prose: w cuts the long lines at the edge

    def compose(self):
        yield PaneText(id="ncu-head")
        yield PaneText(id="ncu-body")

    view: reactive[PaneView | None] = reactive(None, always_update=True)

    def watch_view(self, view: PaneView | None) -> None:
        if view is None:
            return
        try:
            head, body = ncu_renderables(view.root, view.kernel, view.profile, view.now)
        except Exception as exc:
            head, body = Text(f"could not show the ncu profile: {exc!r}", style="bold red"), Text("")
        self.query_one("#ncu-head", Static).update(head)
        self.query_one("#ncu-body", Static).update(body)


def ncu_renderables(root: Path, view: KernelView | None, status: ProfileStatus | None,
                    now: float) -> tuple[RenderableType, RenderableType]:

    if view is None:
        return Text("no kernel selected", style="dim"), Text("")
    progress = Text()
    if status is not None:
        style = "bold" if status.running else ("bold red" if status.ok is False else "")
        progress.append(("profiling: " if status.running else "last profile: ") + status.message + "\n", style=style)
    summary = ncu.latest(state_dir(root), view.id)
    if summary is None:
        hint = "no Nsight Compute profile of this kernel yet: press p to profile it"
        if view.tier == "cpu":
            hint += " (ncu needs a GPU: on the CPU tier the profile reports why it cannot run)"
        return progress + Text(hint, style="dim"), Text("")
    head = Text()
    age = ago(now - summary.created)
    head.append(f"ncu --set {summary.set} · v{summary.version} · {summary.device} · "
                f"{'just now' if age == 'now' else age + ' ago'}", style="bold")
    if view.disk_hash and summary.content_hash != view.disk_hash:
        head.append("  STALE", style="bold reverse")
        head.append(f" the kernel changed since v{summary.version} was profiled")
    text = summary.text().replace(str(root) + "/", "")  # paths as the user sees them
    body = Group(*(Text(line) for line in text.splitlines()[1:]))
    return progress + head, body
