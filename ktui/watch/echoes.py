"""A kernel that keeps saving its own files must not make ``ktui watch`` re-run it forever.

Confined (``ktui.worker.confine``), a kernel cannot write its source, its reference or a helper
module; unconfined (``KTUI_NO_CONFINE=1``, a kernel without Landlock) it can, and each such save
starts it again. An *echo* is a save of a file last written while an unconfined run of the kernel
was in flight (``RunQueue.could_have_written``): a file that run could have written. A save made
after the run ended — an agent writing its next version the moment it reads the verdict — is
never one: nothing a run starts outlives it. After
``LIMIT`` re-runs caused by echoes in a row, the next echo re-runs nothing and says why; any
other save of the kernel (the user's) ends the streak and runs it as always.
"""

from __future__ import annotations

import os
from pathlib import Path

from ktui.protocol.notices import RerunsStopped

LIMIT = 3  # re-runs caused by a kernel's own saves, in a row, before it is stopped


class Echoes:
    """Counts each kernel's echoes in a row; touched from the watcher's thread only."""

    def __init__(self, root: Path, limit: int = LIMIT):
        self.root = Path(root)
        self.limit = limit
        self._streak: dict[Path, int] = {}

    def admit(self, kernel_id: str, kernel_path: Path, saved: Path, echo: bool) -> tuple[bool, RerunsStopped | None]:
        """Whether the save of ``saved`` re-runs the kernel; the notice when this echo stops it."""
        if not echo:
            self.forget(kernel_path)
            return True, None
        streak = self._streak.get(kernel_path, 0) + 1
        self._streak[kernel_path] = streak
        if streak <= self.limit:
            return True, None
        if streak > self.limit + 1:
            return False, None  # stopped already, and said so
        name = os.path.relpath(saved, self.root)
        message = (f"kernel {kernel_id} kept rewriting {name} during its own runs ({self.limit} re-runs in a row "
                   f"caused by no save of yours): stopped re-running it; save it to run again")
        return False, RerunsStopped(kernel_id, str(saved), message)

    def forget(self, kernel_path: Path) -> None:
        """The user saved or re-ran the kernel: its streak starts again."""
        self._streak.pop(kernel_path, None)
