"""The seed guard (``ktui.worker.seeds``): before the checks, inputs from fresh seeds are compared
with those the problem's own seeds make, and fresh seeds that make another kind are given up.

In-process, on references written here in ktui's own format, each declaring its seeds in TESTS.
"""

from __future__ import annotations

import importlib.util
import random

import pytest
import torch

from ktui.protocol.job import Job, Options
from ktui.worker.context import RunContext
from ktui.worker.formats.native import NativeProblem
from ktui.worker.seeds import choice
from ktui.worker.seeds.kinds import Envelope, kind_of
from ktui.worker.seeds.ranges import DECLARED_ONLY, SPAN, WIDE, WIDENED
from ktui.worker.tier import detect

pytestmark = pytest.mark.unit

# GPU MODE sort's pattern: row i is drawn around seed + i, so the seed sets the values' scale
# (``offset`` "0" keeps the scale whatever the seed).
SEED_PLUS_VALUES = """
import torch
TESTS = {tests}
CALLS = []
def generate_input(seed, size):
    CALLS.append(seed)
    rows = int(size ** 0.5)
    cols = -(-size // rows)
    x = torch.empty(rows, cols)
    for i in range(rows):
        gen = torch.Generator().manual_seed(seed + i)
        x[i] = torch.randn(cols, generator=gen) + {offset}
    x = x.flatten()[:size].contiguous()
    return (x.sort()[0] if {sorted_when} else x,)
def ref_kernel(x):
    return torch.sort(x)[0]
"""


def sort_pattern(rows: int) -> torch.Tensor:
    """What that pattern makes for 1023 values from ``seed`` (one row per generator seed)."""
    cols = -(-1023 // rows)
    return lambda seed: torch.cat([torch.randn(cols, generator=torch.Generator().manual_seed(seed + i)) + seed + i
                                   for i in range(rows)])[:1023]


def context(tmp_path, tests: list[dict], sorted_when: str = "False", offset: str = "seed + i", seed: int = 5,
            reference_hash: str = "") -> RunContext:
    path = tmp_path / "op.py"
    path.write_text(SEED_PLUS_VALUES.format(tests=tests, sorted_when=sorted_when, offset=offset))
    spec = importlib.util.spec_from_file_location(f"op_{tmp_path.name}", path)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    job = Job(run_id="r", kernel_id="k", kernel_path="k.py", reference_path=str(path), reference_error="",
              reference_hash=reference_hash, root=str(tmp_path), version=1, content_hash="", source="", run_dir="",
              options=Options(seed=seed))
    ctx = RunContext(job=job, tier=detect(force_cpu=True), emit=lambda event: None)
    ctx.reference = reference
    ctx.problem = NativeProblem(job, ctx.tier, None, reference, ctx.next_seed)
    return ctx


def test_sorts_inputs_from_seeds_near_2_31_lie_outside_what_its_own_seeds_make():
    make = sort_pattern(31)
    envelope = Envelope([kind_of("input 0", make(s)) for s in (4242, 5236, 1001)])
    assert envelope.outside(kind_of("input 0", make(7000))) == []  # a seed of the declared span: the same kind
    far = dict(envelope.outside(kind_of("input 0", make(1_860_000_000))))  # what wide fresh seeds made
    assert set(far) == {"distinct", "size"}, far
    assert far["distinct"].startswith("input 0: ") and far["distinct"].endswith(
        "distinct values in 1023, where the problem's own seeds' have 99%–100% distinct")
    assert "values of size 1.9e+09, where the problem's own seeds' are of size" in far["size"]


def test_fresh_seeds_from_the_declared_span_that_keep_the_inputs_kind_are_kept(tmp_path):
    ctx = context(tmp_path, [{"size": 255, "seed": 2113}, {"size": 1024, "seed": 6007}, {"size": 1500, "seed": 3391}])
    chosen = choice.choose(ctx)
    assert ctx.fresh_seeds.how == SPAN and (ctx.fresh_seeds.low, ctx.fresh_seeds.high) == (2113, 6007)
    assert chosen.rejected == [] and chosen.compared == ["size=255", "size=1024", "size=1500"]
    assert chosen.note() == "TESTS's seeds, then fresh ones from 2113–6007 (their span)"
    rng = random.Random(1)
    assert all(2113 <= ctx.fresh_seeds.draw(rng) <= 6007 for _ in range(100))


def test_a_widened_range_that_makes_another_kind_gives_way_to_the_declared_span(tmp_path):
    # well above its own span, 40–90, this problem's inputs come sorted; their scale is the same for every seed
    ctx = context(tmp_path, [{"size": 255, "seed": 40}, {"size": 1024, "seed": 60}, {"size": 400, "seed": 90}],
                  sorted_when="seed > 120", offset="0")
    chosen = choice.choose(ctx)
    assert [r.how for r, _ in chosen.rejected] == [WIDENED]
    assert ctx.fresh_seeds.how == SPAN and (ctx.fresh_seeds.low, ctx.fresh_seeds.high) == (40, 90)
    note = chosen.note()
    assert note.startswith("TESTS's seeds, then fresh ones from 40–90 (their span); fresh seeds from 0–1002 made "
                           "other inputs (size=")
    assert "input 0: sorted, where none of the problem's own seeds' is" in note


def test_where_every_fresh_seed_changes_the_inputs_scale_only_the_declared_seeds_are_used(tmp_path):
    ctx = context(tmp_path, [{"size": 255, "seed": 11}, {"size": 1024, "seed": 12}, {"size": 400, "seed": 13}])
    chosen = choice.choose(ctx)
    assert ctx.fresh_seeds.how == DECLARED_ONLY and ctx.fresh_seeds.choices == 3
    assert chosen.note().startswith("TESTS's seeds alone (11, 12, 13): no fresh seed keeps what their inputs are; "
                                    "fresh seeds from 0–1002 made other inputs (")
    assert "input 0: values of size" in chosen.note()
    assert {ctx.next_seed() for _ in range(30)} == {11, 12, 13}
    figures = chosen.figures()
    assert figures["fresh_seeds"] == {"low": 11, "high": 13, "how": DECLARED_ONLY, "seeds": [11, 12, 13]}
    assert figures["seed_guard"]["rejected"][0]["how"] == WIDENED


def test_a_problem_that_declares_no_seed_keeps_the_wide_range_and_makes_no_input_to_compare(tmp_path):
    ctx = context(tmp_path, [{"size": 255}, {"size": 1024}])
    chosen = choice.choose(ctx)
    assert ctx.fresh_seeds.how == WIDE and chosen.figures() == {} and ctx.reference.CALLS == []
    assert ctx.problem.test_seeds == [None, None]


def test_the_guard_answers_once_per_reference_version_the_same_way_and_leaves_the_runs_draws_alone(tmp_path):
    tests = [{"size": 255, "seed": 11}, {"size": 1024, "seed": 12}, {"size": 400, "seed": 13}]
    first = context(tmp_path, tests, reference_hash="v1")
    state = first.seeds.getstate()
    chosen = choice.choose(first)
    assert first.seeds.getstate() == state  # its probes are its own: --seed N draws what it drew before
    made = len(first.reference.CALLS)
    again = context(tmp_path, tests, reference_hash="v1")  # the warm worker's next run of that version
    assert choice.choose(again) is chosen and again.fresh_seeds == chosen.range
    assert len(again.reference.CALLS) == 0 and len(first.reference.CALLS) == made
    choice.CHOSEN.clear()  # a fresh process: the same problem, the same answer
    assert choice.choose(context(tmp_path, tests, reference_hash="v1")).rejected == chosen.rejected
