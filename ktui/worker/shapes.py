"""Fresh shapes: sizes a kernel was never shown, derived from the ones it was (rung ``fresh-shapes``).

A kernel can be right on exactly the ``TESTS`` sizes and wrong elsewhere (a size hard-coded, a
block that equals the declared width). A fresh shape changes the *dimensions* — keys whose declared
values are all non-negative ints, at least two of them distinct — and keeps what those values
share: every derived value is a multiple of their gcd, and a power of two when all of them are.
It differs from every declared value of its key, stays within the declared range and, where it
can, at or below the key's median declared value (cheap: it runs on the save → verdict path).
Its other keys (dtype strings, flags, a key with one declared value) are copied from one declared
test. Draws come from a seed, so a run with ``--seed`` derives the same shapes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

NOT_DIMENSIONS = frozenset({"seed"})  # ints in a shape that are not sizes (GPU MODE's task.yml carries them)
DRAWS = 32  # random draws per value before the values in range are walked in order
WALK = 4096  # values walked at most


@dataclass(frozen=True)
class Dimension:
    """One size key of the declared shapes and the rule its fresh values follow."""

    name: str
    declared: frozenset[int]
    step: int  # the gcd of the declared values: fresh values are its multiples
    powers_of_two: bool  # every declared value is one, so every fresh value is one
    low: int
    high: int  # the largest declared value: never exceeded
    cheap: int  # the median declared value: the bound tried first

    def allows(self, value: int) -> bool:
        return (self.low <= value <= self.high and value % self.step == 0 and value not in self.declared
                and (not self.powers_of_two or _power_of_two(value)))

    def draw(self, rng: random.Random, avoid: set[int]) -> int | None:
        """A fresh value (log-uniform, so small sizes are as likely as large ones), one not in
        ``avoid`` where there is one; None when the rule leaves no fresh value."""
        start = max(self.low, self.step, 1)
        for high in (self.cheap, self.high):
            if high < start:
                continue
            for _ in range(DRAWS):
                value = self._rounded(math.exp(rng.uniform(math.log(start), math.log(high))))
                if value <= high and self.allows(value) and value not in avoid:
                    return value
        walked = [v for v in self._walk(start) if self.allows(v)]
        return next((v for v in walked if v not in avoid), walked[0] if walked else None)

    def _rounded(self, x: float) -> int:
        if self.powers_of_two:
            return 1 << max(0, round(math.log2(x)))
        return self.step * max(1, round(x / self.step))

    def _walk(self, start: int):
        value = -(-start // self.step) * self.step
        for _ in range(WALK):
            if value > self.high:
                return
            yield value
            value = value * 2 if self.powers_of_two else value + self.step


def dimensions(tests: list[dict]) -> dict[str, Dimension]:
    """The keys of ``tests`` that are sizes, in the order they first appear."""
    keys = list(dict.fromkeys(k for shape in tests for k in shape))
    out = {}
    for key in keys:
        values = [shape[key] for shape in tests if key in shape]
        if key in NOT_DIMENSIONS or not all(_size(v) for v in values) or len(set(values)) < 2:
            continue
        distinct = sorted(set(values))
        out[key] = Dimension(
            name=key,
            declared=frozenset(distinct),
            step=math.gcd(*distinct),
            powers_of_two=all(_power_of_two(v) for v in distinct),
            low=distinct[0],
            high=distinct[-1],
            cheap=distinct[len(distinct) // 2],
        )
    return out


def derive(tests: list[dict], count: int, seed: int) -> list[dict]:
    """At most ``count`` shapes unlike any of ``tests``, each a declared test with its dimensions
    redrawn (see the module's rule); fewer, or none, when the rule leaves no more."""
    dims = dimensions(tests)
    if count <= 0 or not dims:
        return []
    rng = random.Random(seed)
    used: dict[str, set[int]] = {name: set() for name in dims}
    out: list[dict] = []
    for _ in range(4 * count):
        base = rng.choice(tests)
        shape = dict(base)
        for name in base:
            value = dims[name].draw(rng, used[name]) if name in dims else None
            if value is not None:
                shape[name] = value
        if shape != base and shape not in tests and shape not in out:
            out.append(shape)
            for name in dims:
                if name in shape:
                    used[name].add(shape[name])
            if len(out) == count:
                break
    return out


def pick(shapes: list[dict], count: int, seed: int) -> list[dict]:
    """``count`` of a reference's own fresh shapes, chosen by ``seed`` and kept in their order."""
    if count >= len(shapes):
        return list(shapes)
    chosen = sorted(random.Random(seed).sample(range(len(shapes)), count))
    return [shapes[i] for i in chosen]


def _size(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0
