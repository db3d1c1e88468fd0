"""The one rule that combines ktui's metrics with a problem's own check (GPU MODE's
check_implementation) on the same output: the verdict never says "wrong" and "passes" at once."""

from types import SimpleNamespace

import pytest
import torch

from ktui.worker.judgement import judge
from ktui.worker.phases import Phases

pytestmark = pytest.mark.unit


def context(check=None):
    """What ``judge`` reads of a run: the tolerances, whether the problem judges itself, its check."""
    problem = SimpleNamespace(has_check=check is not None)
    return SimpleNamespace(tolerances=None, problem=problem, check=check, phases=Phases())


def pairs_of(out, ref):
    return [(out, ref)]


def test_without_a_problem_check_ktui_metrics_decide():
    ref = torch.linspace(-1, 1, 100)
    verdict = judge(context(), (), ref + 1.0, pairs_of(ref + 1.0, ref))
    assert not verdict.passed and "elements beyond" in verdict.reason
    assert "check" not in verdict.figures


def test_a_mismatch_says_which_value_is_the_kernels_and_which_the_references():
    ref = torch.zeros(8)
    out = ref.clone()
    out[3] = 2.5
    verdict = judge(context(), (), out, pairs_of(out, ref))
    assert "(worst at [3]: kernel 2.5, reference 0)" in verdict.reason


def test_a_problem_check_that_accepts_what_ktui_thresholds_reject_decides_and_says_so():
    ref = torch.linspace(1, 2, 100)
    out = ref * (1 + 1e-3)  # beyond float32's rtol=1e-4, inside a looser problem tolerance
    verdict = judge(context(lambda data, output: (True, "")), (), out, pairs_of(out, ref))
    assert verdict.passed and not verdict.reasons
    assert verdict.figures["check"] == {"passed": True, "message": ""}
    assert "accepts it and decides" in verdict.notes[0] and "elements beyond" in verdict.notes[0]


def test_a_problem_check_that_rejects_what_ktui_accepts_fails_the_output_and_says_ktui_alone_would_pass():
    ref = torch.linspace(1, 2, 100)
    verdict = judge(context(lambda data, output: (False, "mismatch at 3")), (), ref.clone(), pairs_of(ref.clone(), ref))
    assert not verdict.passed
    assert verdict.reason == "check_implementation: mismatch at 3 (ktui's metrics alone would pass it)"


def test_when_both_reject_both_reasons_are_given():
    ref = torch.linspace(1, 2, 100)
    out = ref + 1.0
    verdict = judge(context(lambda data, output: (False, "mismatch")), (), out, pairs_of(out, ref))
    assert not verdict.passed
    assert verdict.reasons[0] == "check_implementation: mismatch" and "elements beyond" in verdict.reasons[1]


def test_unwritten_poison_is_counted_whatever_the_judges_say():
    from ktui.worker.tier import fill_poison

    ref = torch.ones(10)
    out = ref.clone()
    fill_poison(out[5:])  # a view: not contiguous? it is; the poison stays recognisable
    verdict = judge(context(lambda data, output: (True, "")), (), out, pairs_of(out, ref))
    assert verdict.unwritten == 5 and "output 0: 5" in verdict.unwritten_where


def test_a_wrong_output_gets_its_error_map_and_its_reason_says_where():
    ref = torch.randn(64, 115)
    out = ref.clone()
    out[:, 112:] += 1.0
    ctx = context()
    verdict = judge(ctx, (), out, pairs_of(out, ref))
    assert verdict.figures["error_map"]["description"] == "all mismatches in cols 112–114 of every row (the last 3 columns)"
    assert verdict.reason.endswith("; all mismatches in cols 112–114 of every row (the last 3 columns)")
    assert "error map" in ctx.phases.take()


def test_a_passing_output_pays_nothing_for_an_error_map():
    ref = torch.randn(64, 115)
    ctx = context()
    verdict = judge(ctx, (), ref.clone(), pairs_of(ref.clone(), ref))
    assert verdict.passed and "error_map" not in verdict.figures and "error map" not in ctx.phases.take()


def test_a_comparison_expected_to_fail_asks_for_no_map():
    ref = torch.randn(64, 115)
    ctx = context()
    verdict = judge(ctx, (), ref + 1.0, pairs_of(ref + 1.0, ref), mapped=False)
    assert not verdict.passed and "error_map" not in verdict.figures and "error map" not in ctx.phases.take()


def test_each_wrong_output_of_several_gets_its_own_map():
    ref = torch.randn(16, 40)
    right, wrong = ref.clone(), ref.clone()
    wrong[3] = float("nan")
    verdict = judge(context(), (), (right, wrong), [(right, ref), (wrong, ref)])
    assert "error_map" not in verdict.figures["outputs"][0]
    assert verdict.figures["outputs"][1]["error_map"]["description"] == "NaN in row 3 only"
    assert verdict.figures["error_map"]["output"] == 1
    assert verdict.reason.startswith("output 1: ") and verdict.reason.endswith("; NaN in row 3 only")
