"""The status line: stale badge, device and tier, the queue, how the watcher watches, follow."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.reactive import reactive

from ktui.tui.searchable import Shown
from ktui.tui.text import device_text


@dataclass(frozen=True)
class StatusInfo:
    tier: str = ""
    device: str = ""
    arch: str = ""
    gpus: tuple[str, ...] = ()  # one worker per GPU: their indices
    running: str | None = None
    running_rung: str = ""
    queued: int = 0
    cancelling: bool = False
    watcher: str = "starting"
    watcher_reason: str = ""
    follow: bool = True
    strict: bool = False
    stale: str = ""  # why the selected kernel's results are stale ("" when they are current)
    note: str = ""  # a workspace or worker problem
    activity: str = ""  # e.g. a profile in progress
    remote: str = ""  # ``remote HOST · LINK STATE`` for ``--remote``, "" for a local worker
    weak_test: tuple[str, ...] = ()  # the selected kernel's reference has a weak test: why (its audit)
    unconfined: str = ""  # "not confined: <why>": user code may write anywhere (``ktui.worker.confine``)


class StatusBar(Shown):
    COMPONENT_CLASSES = {"status-bar--stale", "status-bar--warn", "status-bar--muted"}
    info: reactive[StatusInfo] = reactive(StatusInfo, always_update=True)

    def watch_info(self, info: StatusInfo) -> None:
        self.update(self._text(info))

    def _text(self, info: StatusInfo) -> Text:
        warn = self.get_component_rich_style("status-bar--warn", partial=True)
        muted = self.get_component_rich_style("status-bar--muted", partial=True)
        parts: list[Text] = []
        if info.stale:
            badge = Text(" STALE ", style=self.get_component_rich_style("status-bar--stale", partial=True))
            badge.append(f" {info.stale}")
            parts.append(badge)
        if info.weak_test:
            reason = info.weak_test[0].split(" — ")[0]
            parts.append(Text("weak test" + (f": {reason}" if reason else ""), style=warn))
        if info.note:
            parts.append(Text(info.note, style=warn))
        if info.remote:
            parts.append(Text(info.remote, style=warn if not info.remote.endswith("· up") else ""))
        parts.append(Text(device_text(info.tier, info.device, info.arch, info.gpus)))
        if info.unconfined:
            parts.append(Text(info.unconfined, style=warn))
        if info.running:
            what = f"running {info.running}" + (f" ({info.running_rung})" if info.running_rung else "")
            if info.cancelling:
                what += " · cancelling stale run"
            queue = Text(what)
            if info.queued:
                queue.append(f" · {info.queued} queued")
        else:
            queue = Text(f"idle · {info.queued} queued" if info.queued else "idle", style=muted)
        parts.append(queue)
        if info.activity:
            parts.append(Text(info.activity))
        # The modes are what a glance at the line is for: they keep the right end at any width,
        # and the rest gives way (cut with an ellipsis) when the line is too narrow for all.
        modes: list[Text] = []
        if info.watcher == "polling":
            modes.append(Text("watch: polling" + (f" ({info.watcher_reason})" if info.watcher_reason else ""), style=warn))
        else:
            modes.append(Text(f"watch: {info.watcher}", style=muted))
        modes.append(Text("follow" if info.follow else "follow off", style=muted))
        if info.strict:
            modes.append(Text("strict", style=warn))
        left, right = _joined(parts, muted), _joined(modes, muted)
        width = self.content_size.width or self.size.width or 80
        room = width - right.cell_len - 3
        if room < 8:  # too narrow for both: the modes alone
            right.truncate(width, overflow="ellipsis")
            return right
        left.truncate(room, overflow="ellipsis")
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append_text(left)
        out.append(" │ ", style=muted)
        out.append_text(right)
        return out

    def on_resize(self) -> None:
        self.update(self._text(self.info))


def _joined(parts: list[Text], muted) -> Text:
    out = Text(no_wrap=True)
    for i, part in enumerate(parts):
        if i:
            out.append(" │ ", style=muted)
        out.append_text(part)
    return out
