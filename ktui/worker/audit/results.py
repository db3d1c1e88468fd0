"""The audit's value types: what a mutant did on one shape, and one check's conclusion.

A leaf of the audit package, so the mutants, the reference checks and the verdict can name results
without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# What one mutant (or one ignored input) did on one shape.
PASSES = "passes"  # the test accepts it: a kernel this trivial would pass here
CAUGHT = "caught"  # the test rejects it
SAME = "same"  # it is the right answer itself at this shape: it passes, whatever the tolerance
NOT_APPLICABLE = "n/a"  # it does not exist at this shape (no input has the output's shape)

# A check's status, as its line shows it.
OK = "ok"
WEAK = "weak"
SKIPPED = "skipped"
FRESH_SEEDS = "fresh seeds"  # weak only on ktui's fresh seeds, not on the problem's own: ktui's fault


@dataclass(frozen=True)
class Judged:
    status: str
    detail: str = ""  # why it was caught, or the note of a pass


@dataclass
class CheckResult:
    key: str  # "zeros", "copy of input 0", "seeds": what the subsumption rules name
    rung: str  # ``mutant[zeros]``, ``reference[different seeds]``: its line and its event
    status: str  # OK | WEAK | SKIPPED
    message: str  # the line's text
    reason: str = ""  # when weak: what passes, why, and what to change
    partial: str = ""  # when it passes on only some shapes: which
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def weak(self) -> bool:
        return self.status == WEAK
