"""The seed-range rule (``ktui.worker.seeds.ranges``): where a problem's fresh seeds come from."""

from __future__ import annotations

import random

import pytest

from ktui.worker.seeds.ranges import (
    DECLARED_ONLY,
    MIN_FRESH,
    SPAN,
    WIDE,
    WIDENED,
    declared_only,
    declared_span,
    fresh_range,
    split_seed,
)

pytestmark = pytest.mark.unit

SORT_PY = [4242, 5236, 1001, 5531, 9173]  # GPU MODE pmpp_v2/sort_py's task.yml tests


def draws(seed_range, n=2000, seed=0):
    rng = random.Random(seed)
    return [seed_range.draw(rng) for _ in range(n)]


def test_a_problem_that_declares_no_seed_keeps_drawing_from_1_to_2_31():
    wide = fresh_range([])
    assert (wide.low, wide.high, wide.how) == (1, 2**31 - 2, WIDE)
    rng, old = random.Random(7), random.Random(7)
    assert [wide.draw(rng) for _ in range(5)] == [old.randrange(1, 2**31 - 1) for _ in range(5)]  # the same sequence as before


def test_fresh_seeds_come_from_the_span_of_the_declared_ones_and_are_never_one_of_them():
    span = fresh_range(SORT_PY)
    assert (span.low, span.high, span.how) == (1001, 9173, SPAN)
    seeds = draws(span)
    assert all(1001 <= s <= 9173 for s in seeds) and not set(seeds) & set(SORT_PY)
    assert len(set(seeds)) > 1500  # fresh: spread over the span, not a handful


@pytest.mark.parametrize("declared", [[11, 12, 13], [0], [42], [2**31 - 5], [100, 300, 700]])
def test_a_narrow_span_is_widened_around_itself_to_hold_min_fresh_undeclared_seeds(declared):
    widened = fresh_range(declared)
    assert widened.how == WIDENED
    assert widened.low <= min(declared) and widened.high >= max(declared) and widened.low >= 0
    assert widened.high - widened.low + 1 - len(set(declared)) == MIN_FRESH  # no wider than it must be
    assert not set(draws(widened)) & set(declared)


def test_the_span_itself_and_the_declared_seeds_alone_are_the_guards_narrower_choices():
    assert declared_span([11, 12, 13]) is None  # no seed between them that they do not declare
    span = declared_span([40, 60, 90])
    assert (span.low, span.high, span.how) == (40, 90, SPAN)
    only = declared_only([13, 11, 12, 11])
    assert only.how == DECLARED_ONLY and set(draws(only, 200)) == {11, 12, 13} and only.choices == 3
    assert only.holds(12) and not only.holds(14) and only.text() == "11, 12, 13"


def test_a_case_keeps_its_shape_and_gives_its_seed():
    assert split_seed({"size": 1023, "seed": 4242}, "tests[0]") == ({"size": 1023}, 4242)
    assert split_seed({"size": 8}, "tests[0]") == ({"size": 8}, None)
    for bad in ("4242", 4.5, True, None):
        with pytest.raises(ValueError, match=r"task.yml: tests\[2\]: seed must be an integer"):
            split_seed({"size": 8, "seed": bad}, "task.yml: tests[2]")
