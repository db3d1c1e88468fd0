"""The plain printer of runs that interleave (``ktui run --ray``): each run's lines held until it
ends. Where the runs go (Ray among the others) is ``ktui.dispatch.placement.place``'s one choice."""

from __future__ import annotations


class ByRun:
    """A consumer that holds each run's events and hands them to ``printer`` when the run ends:
    the runs of different actors interleave, and each kernel's rungs stay under its header."""

    def __init__(self, printer):
        self.printer = printer
        self._held: dict[str, list] = {}

    def __call__(self, event) -> None:
        held = self._held.setdefault(event.run_id, [])
        held.append(event)
        if event.type == "run_finished":
            for each in self._held.pop(event.run_id):
                self.printer(each)
