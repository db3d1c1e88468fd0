"""The fresh shapes derived from TESTS keep what the declared sizes share, stay cheap, and are
unlike every declared one (``ktui.worker.shapes``)."""

from __future__ import annotations

import pytest

from ktui.worker.shapes import derive, dimensions, pick

pytestmark = pytest.mark.unit

SOFTMAX = [{"rows": 1, "cols": 1}, {"rows": 3, "cols": 7}, {"rows": 128, "cols": 1000},
           {"rows": 97, "cols": 3001}, {"rows": 64, "cols": 2048, "dtype": "bfloat16"}, {"rows": 256, "cols": 8192}]


def test_every_derived_width_is_a_multiple_of_what_the_declared_widths_share():
    tests = [{"width": 48, "rows": 5}, {"width": 160, "rows": 3}, {"width": 1024, "rows": 9}]  # gcd 16
    for seed in range(50):
        for shape in derive(tests, 2, seed):
            assert shape["width"] % 16 == 0 and shape["width"] not in (48, 160, 1024), shape


def test_declared_powers_of_two_give_powers_of_two():
    tests = [{"n": 64}, {"n": 512}, {"n": 4096}]
    seen = {shape["n"] for seed in range(50) for shape in derive(tests, 2, seed)}
    assert seen and seen <= {128, 256, 1024, 2048}


def test_fresh_values_stay_in_the_declared_range_and_unlike_any_declared_value():
    for seed in range(50):
        shapes = derive(SOFTMAX, 2, seed)
        assert len(shapes) == 2
        for shape in shapes:
            assert 1 <= shape["rows"] <= 256 and shape["rows"] not in {1, 3, 128, 97, 64, 256}
            assert 1 <= shape["cols"] <= 8192 and shape["cols"] not in {1, 7, 1000, 3001, 2048, 8192}
            assert shape not in SOFTMAX


def test_fresh_shapes_stay_small_at_most_the_median_declared_size_where_one_is_free():
    for seed in range(50):
        for shape in derive(SOFTMAX, 2, seed):
            assert shape["rows"] <= 97 and shape["cols"] <= 2048, shape


def test_non_size_keys_are_copied_from_a_declared_test():
    for seed in range(50):
        for shape in derive(SOFTMAX, 2, seed):
            assert shape.get("dtype", "float32") in ("float32", "bfloat16")
            assert set(shape) in ({"rows", "cols"}, {"rows", "cols", "dtype"})


def test_a_seed_bools_and_single_valued_keys_are_not_dimensions():
    tests = [{"size": 10, "seed": 5, "causal": True, "heads": 8}, {"size": 300, "seed": 9, "causal": False, "heads": 8}]
    assert set(dimensions(tests)) == {"size"}
    for seed in range(20):
        for shape in derive(tests, 2, seed):
            assert shape["heads"] == 8 and shape["seed"] in (5, 9) and shape["causal"] in (True, False)


def test_the_same_seed_derives_the_same_shapes_and_another_seed_others():
    assert derive(SOFTMAX, 2, 42) == derive(SOFTMAX, 2, 42)
    assert any(derive(SOFTMAX, 2, 42) != derive(SOFTMAX, 2, seed) for seed in range(43, 48))


def test_no_fresh_shape_when_the_rule_leaves_no_undeclared_value():
    assert derive([{"n": 64}, {"n": 128}], 2, 1) == []  # powers of two, multiples of 64, within [64, 128]
    assert derive([{"n": 64}, {"n": 64, "dtype": "bfloat16"}], 2, 1) == []  # one declared size
    assert derive([{"dtype": "float16"}, {"dtype": "float32"}], 2, 1) == []


def test_a_references_own_list_is_sampled_by_the_seed_in_its_order():
    own = [{"n": i} for i in range(10)]
    chosen = pick(own, 3, 7)
    assert len(chosen) == 3 and chosen == sorted(chosen, key=lambda s: s["n"]) and chosen == pick(own, 3, 7)
    assert pick(own[:2], 3, 7) == own[:2]
