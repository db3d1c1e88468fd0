"""What kind of inputs one draw makes, per input, and whether a fresh draw lies outside what the
declared seeds make.

Per input tensor: its form (dtype and shape), and, when it has at least ``MIN_ELEMENTS`` elements
(fewer are too few to tell a kind from chance), how many of its values are distinct, whether it is
sorted, whether it holds NaN or infinity, and the size of its values (their mean magnitude), read
on at most ``SAMPLE`` elements at an even stride. A fresh draw is judged against every draw of the
problem's own seeds (``Envelope``), not against one: a problem may make its inputs vary by design
from seed to seed (vectorsum draws a random offset and scale), and only what none of its own seeds
makes is another kind. Signs are left out for that reason: a random offset makes them vary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_ELEMENTS = 16
SAMPLE = 1 << 14  # the guard runs on every run of a problem with declared seeds: a sample keeps it cheap
DISTINCT_RATIO = 2.0  # a fraction of distinct values beyond this factor of the declared draws' is another kind
SIZE_RATIO = 4.0  # so is a size beyond this factor of theirs


@dataclass(frozen=True)
class Kind:
    """One input of one draw, in the figures its kind is compared by."""

    name: str  # ``data[0]``, ``input 1``
    form: str  # ``float32[1023]``: another dtype or shape is another kind, however small
    measured: bool  # it has ``MIN_ELEMENTS`` (and is not complex): the figures below are compared
    numel: int = 0  # the elements read (at most ``SAMPLE``)
    distinct: int = 0
    sorted: bool = False  # ascending or descending, with at least two distinct values
    nonfinite: bool = False
    size: float | None = None  # the mean magnitude of its finite values; None for booleans or none finite

    @property
    def distinct_fraction(self) -> float:
        return self.distinct / self.numel if self.numel else 0.0


def kind_of(name: str, t: torch.Tensor) -> Kind:
    form = f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"
    if t.numel() < MIN_ELEMENTS or t.dtype.is_complex:
        return Kind(name, form, False)
    flat = t.detach().reshape(-1)
    if flat.numel() > SAMPLE:
        flat = flat[:: -(-flat.numel() // SAMPLE)]
    values = (flat.to(torch.int8) if t.dtype == torch.bool else flat).to(torch.float64)
    finite = values[torch.isfinite(values)]
    distinct = int(torch.unique(values).numel())
    steps = values[1:] - values[:-1]
    ordered = distinct > 1 and (bool((steps >= 0).all()) or bool((steps <= 0).all()))
    size = float(finite.abs().mean()) if finite.numel() and t.dtype != torch.bool else None
    return Kind(name, form, True, int(values.numel()), distinct, ordered, finite.numel() < values.numel(), size)


def form_difference(declared: Kind, fresh: Kind, declared_seed: int) -> str:
    """"" when ``fresh`` has the form of ``declared`` (the same input of the same shape), else the words."""
    if fresh.form == declared.form:
        return ""
    return f"{fresh.name} is {fresh.form}, where seed {declared_seed}'s is {declared.form}"


class Envelope:
    """What the draws of the problem's own seeds show of one input, over every case compared."""

    def __init__(self, declared: list[Kind]):
        self.kinds = [k for k in declared if k.measured]

    def outside(self, fresh: Kind) -> list[tuple[str, str]]:
        """Where ``fresh`` lies outside every declared draw: ``(figure, words)`` pairs."""
        own = self.kinds
        if not fresh.measured or not own:
            return []
        found = []
        for figure, yes, no in (("sorted", "sorted", "not sorted"), ("nonfinite", "holds NaN or infinity",
                                                                     "holds no NaN or infinity")):
            mine, theirs = getattr(fresh, figure), [getattr(k, figure) for k in own]
            if mine and not any(theirs):
                found.append((figure, f"{yes}, where none of the problem's own seeds' is"))
            elif not mine and all(theirs):
                found.append((figure, f"{no}, where each of the problem's own seeds' is"))
        low, high = _bounds([k.distinct_fraction for k in own])
        if not low / DISTINCT_RATIO <= fresh.distinct_fraction <= high * DISTINCT_RATIO:
            found.append(("distinct", f"{fresh.distinct} distinct values in {fresh.numel}, where the problem's own "
                                      f"seeds' have {_percent(low, high)} distinct"))
        sizes = [k.size for k in own if k.size is not None]
        if fresh.size is not None and sizes:
            low, high = _bounds(sizes)
            if not low / SIZE_RATIO <= fresh.size <= high * SIZE_RATIO:
                around = f"{low:.2g}" if low == high else f"{low:.2g}–{high:.2g}"
                found.append(("size", f"values of size {fresh.size:.2g}, where the problem's own seeds' are of size {around}"))
        return [(figure, f"{fresh.name}: {words}") for figure, words in found]


def _bounds(values: list[float]) -> tuple[float, float]:
    return min(values), max(values)


def _percent(low: float, high: float) -> str:
    return f"{low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"{low:.0%}–{high:.0%}"
