"""``PaneView``: the one thing the panes that follow the selected version are given.

The app builds one after every change it hears of and sets it on each of those panes (attributes
down); a pane draws from it alone. The costly drawings (the SASS diff, the history chart) compare
the view with the one they last drew and redo only when what they show has changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ktui.history.store import Store
from ktui.tui.state import KernelView, ProfileStatus
from ktui.tui.versions import VersionPoint


@dataclass(frozen=True)
class PaneView:
    kernel: KernelView | None  # the selected kernel, None when the list is empty
    root: Path  # the workspace: run folders and profiles are found beneath it
    store: Store  # the history, for the panes that compare versions
    now: float  # the dashboard's clock, for ages
    profile: ProfileStatus | None = None  # the selected kernel's profile in flight or last finished
    diff_base: str = "previous"  # what the SASS diff compares the version with
    points: tuple[VersionPoint, ...] = ()  # the selected kernel's finished versions, oldest first

    @property
    def version_key(self) -> tuple:
        """What the version-level panes draw from: the kernel, its version and how far it got."""
        k = self.kernel
        if k is None:
            return ()
        return (k.id, k.version, k.state, k.verdict, bool(k.find_rung("dumps")))
