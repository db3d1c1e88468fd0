"""Where a rung's time goes: named phases (inputs, candidate, reference, metrics) per rung.

The save → verdict latency is published per stage; a rung's ``duration_s`` alone cannot say whether
a correctness check waited on input generation, the candidate, the reference or the comparison.
The ladder takes the phases of each rung into its ``RungFinished.phases_s``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


class Phases:
    """A stopwatch of named phases; the same name twice in a rung adds up (strict mode's seeds).
    A phase timed inside another is its own: the outer one's time leaves it out, so the phases
    never add up to more than the rung took (the error map, inside the metrics)."""

    def __init__(self) -> None:
        self._spent: dict[str, float] = {}
        self._inner: list[float] = []  # per phase in progress, the time its inner phases took

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        self._inner.append(0.0)
        try:
            yield
        finally:
            took = time.perf_counter() - started
            inner = self._inner.pop()
            self._spent[name] = self._spent.get(name, 0.0) + took - inner
            if self._inner:
                self._inner[-1] += took

    def add(self, spent: dict[str, float]) -> None:
        """Phases timed elsewhere (the dumps' own thread), added to this rung's."""
        for name, seconds in spent.items():
            self._spent[name] = self._spent.get(name, 0.0) + seconds

    def take(self) -> dict[str, float]:
        """The phases since the last ``take``, rounded, and a fresh start."""
        spent, self._spent = self._spent, {}
        return {name: round(seconds, 4) for name, seconds in spent.items()}
