"""A problem's own seeds are run beside fresh ones drawn from their span, so that fresh seeds never
make its test weaker than the problem's own evaluator.

``tests/fixtures/gpumode/seedsort`` is written here with GPU MODE sort's pattern (row ``i`` drawn
around ``seed + i``): seeds near 2**31 would make values float32 rounds to a few constants, already
sorted, and a kernel that copies its input would pass. It must fail, on the problem's own first
seed; an honest sort must pass, each test checked on its own seed and on a fresh one of the span.
"""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, by_kernel, finished, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker

DECLARED = {"size=255": 2113, "size=1024": 6007, "size=1500": 3391}  # seedsort's task.yml


@pytest.fixture(scope="module")
def seedsort(tmp_path_factory, warm_ktui):
    root = make_workspace(tmp_path_factory.mktemp("seedsort"))
    shutil.copytree(FIXTURES / "gpumode", root / "gpumode")
    proc = warm_ktui("run", "--no-audit", "--json", "gpumode/seedsort/", cwd=root)
    return by_kernel(parse_events(proc.stdout))


def test_a_kernel_that_copies_its_input_fails_on_the_problems_own_seed(seedsort):
    events = seedsort["seedsort/submission_copy"]
    r = rungs(events)
    assert finished(events)["verdict"] == "failed" and finished(events)["summary"]["correct"] == [0, 3]
    first = r["correctness[size=255]"]
    assert first["figures"]["declared_seed"] == first["figures"]["seed"] == 2113 and "seeds" not in first["figures"]
    assert first["message"].startswith("check_implementation: mismatch")
    assert first["message"].endswith("(on task.yml's seed 2113)")


def test_an_honest_sort_passes_each_test_on_its_own_seed_and_a_fresh_one_of_their_span(seedsort):
    events = seedsort["seedsort/submission"]
    r = rungs(events)
    assert finished(events)["verdict"] == "passed", r
    pre = r["pre-checks"]
    assert pre["figures"]["declared_seeds"] == [2113, 6007, 3391]
    assert pre["figures"]["fresh_seeds"] == {"low": 2113, "high": 6007, "how": "span"}
    assert "seeds: task.yml's seeds, then fresh ones from 2113–6007 (their span)" in pre["message"]
    for label, own in DECLARED.items():
        figures = r[f"correctness[{label}]"]["figures"]
        declared, fresh = figures["seeds"]
        assert declared == figures["declared_seed"] == own and figures["seed"] == fresh
        assert fresh != own and 2113 <= fresh <= 6007
    for rung in ("compile", "run", "dependence"):
        assert 2113 <= r[rung]["figures"]["seed"] <= 6007, rung
    assert all(2113 <= s <= 6007 for s in r["integrity"]["figures"]["seeds"])


def test_strict_mode_checks_each_tests_own_seed_and_three_fresh_ones(tmp_path, warm_ktui):
    root = make_workspace(tmp_path / "ws")
    shutil.copytree(FIXTURES / "gpumode", root / "gpumode")
    proc = warm_ktui("run", "--no-audit", "--no-bench", "--strict", "--json", "gpumode/seedsort/submission.py", cwd=root)
    events = by_kernel(parse_events(proc.stdout))["seedsort/submission"]
    r = rungs(events)
    assert finished(events)["verdict"] == "passed", r
    for label, own in DECLARED.items():
        seeds = r[f"correctness[{label}]"]["figures"]["seeds"]
        assert len(seeds) == 4 and seeds[0] == own and len(set(seeds)) == 4
        assert all(2113 <= s <= 6007 for s in seeds[1:])
