"""The seed-range rule: where a problem's fresh seeds are drawn from (no torch: a pure rule).

Declared seeds say which inputs the problem's author tested with; fresh seeds drawn from their span
make inputs of the same scale. A span holding fewer than ``MIN_FRESH`` seeds it does not declare
(one seed, or 11, 12, 13) is widened around itself, as little as gives that many, never below 0.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

SEED_KEY = "seed"  # the key of a declared seed in a test case (task.yml, TESTS)
WIDE_LOW, WIDE_HIGH = 1, 2**31 - 2  # the range a problem that declares no seed draws from
MIN_FRESH = 1000  # undeclared seeds a declared range holds at least: enough that none can be memorised

WIDE, SPAN, WIDENED, DECLARED_ONLY = "wide", "span", "widened", "declared only"  # how a range was made


@dataclass(frozen=True)
class SeedRange:
    """Fresh seeds are drawn from ``low``…``high`` (inclusive), never one of ``declared`` (every range
    made below holds a seed it does not declare); ``DECLARED_ONLY``: from ``declared`` alone."""

    low: int
    high: int
    how: str
    declared: tuple[int, ...] = field(default=())

    def draw(self, rng: random.Random) -> int:
        if self.how == DECLARED_ONLY:
            return rng.choice(self.declared)
        while True:
            seed = rng.randint(self.low, self.high)
            if seed not in self.declared:
                return seed

    def holds(self, seed: int) -> bool:
        if self.how == DECLARED_ONLY:
            return seed in self.declared
        return self.low <= seed <= self.high

    @property
    def choices(self) -> int:
        """How many different seeds a draw can give."""
        return len(set(self.declared)) if self.how == DECLARED_ONLY else self.high - self.low + 1

    def text(self) -> str:
        """``1001–9173``; ``4242, 5236`` for the declared seeds alone."""
        if self.how == DECLARED_ONLY:
            return ", ".join(str(s) for s in sorted(set(self.declared)))
        return f"{self.low}–{self.high}"

    def to_json(self) -> dict:
        return {"low": self.low, "high": self.high, "how": self.how}


def fresh_range(declared: list[int] | tuple[int, ...]) -> SeedRange:
    """The range fresh seeds come from: 1…2³¹−2 when nothing is declared; else the declared span,
    widened around itself to hold ``MIN_FRESH`` undeclared seeds when it holds fewer."""
    own = tuple(sorted(set(declared)))
    if not own:
        return SeedRange(WIDE_LOW, WIDE_HIGH, WIDE)
    low, high = own[0], own[-1]
    missing = MIN_FRESH + len(own) - (high - low + 1)
    if missing <= 0:
        return SeedRange(low, high, SPAN, own)
    floor = min(0, low)  # a negative declared seed may stay; the range never reaches below 0 otherwise
    down = min(low - floor, missing // 2)
    return SeedRange(low - down, high + missing - down, WIDENED, own)


def declared_span(declared: list[int] | tuple[int, ...]) -> SeedRange | None:
    """The declared seeds' span itself, where it holds a seed they do not declare; else None."""
    own = tuple(sorted(set(declared)))
    if not own or own[-1] - own[0] + 1 <= len(own):
        return None
    return SeedRange(own[0], own[-1], SPAN, own)


def declared_only(declared: list[int] | tuple[int, ...]) -> SeedRange:
    own = tuple(sorted(set(declared)))
    return SeedRange(own[0], own[-1], DECLARED_ONLY, own)


def split_seed(case: dict, where: str) -> tuple[dict, int | None]:
    """A test case without its ``seed``, and that seed (None when it declares none). A seed that is
    not an integer raises ``ValueError`` naming ``where``."""
    if SEED_KEY not in case:
        return case, None
    seed = case[SEED_KEY]
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{where}: seed must be an integer, got {seed!r}")
    return {k: v for k, v in case.items() if k != SEED_KEY}, seed
