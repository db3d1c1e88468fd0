"""The one rule that combines ktui's metrics with a problem's own check (GPU MODE's
check_implementation) on the same output: the verdict never says "wrong" and "passes" at once."""

from types import SimpleNamespace

import pytest
import torch

from ktui.worker.judgement import judge

pytestmark = pytest.mark.unit


def context(check=None):
    """What ``judge`` reads of a run: the tolerances, whether the problem judges itself, its check."""
    problem = SimpleNamespace(has_check=check is not None)
    return SimpleNamespace(tolerances=None, problem=problem, check=check)


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
