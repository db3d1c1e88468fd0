"""The comparison metrics and the dtype-aware pass/fail rule."""

import math

import pytest
import torch

from ktui.worker.metrics import compare, thresholds_for

pytestmark = pytest.mark.unit


def test_identical_outputs_pass_with_infinite_psnr_and_unit_cossim():
    x = torch.randn(100, dtype=torch.float32)
    c = compare(x.clone(), x)
    assert c.passed
    assert c.figures["max_abs"] == 0 and math.isinf(c.figures["psnr"]) and c.figures["cossim"] == pytest.approx(1.0)


def test_nan_never_passes_and_reports_where():
    ref = torch.ones(4, 5)
    out = ref.clone()
    out[2, 3] = float("nan")
    c = compare(out, ref)
    assert not c.passed
    assert c.figures["nonfinite"] == 1
    assert c.figures["worst_index"] == [2, 3]
    assert "non-finite" in c.reason


def test_worst_element_index_and_values_are_reported():
    ref = torch.zeros(3, 4)
    out = ref.clone()
    out[1, 2] = 0.5
    c = compare(out, ref)
    assert not c.passed
    assert c.figures["worst_index"] == [1, 2]
    assert c.figures["worst_out"] == 0.5 and c.figures["worst_ref"] == 0.0
    assert c.figures["max_abs"] == 0.5 and c.figures["mismatched"] == 1


def test_float32_is_judged_elementwise():
    ref = torch.linspace(1, 2, 1000)
    assert compare(ref * (1 + 1e-6), ref).passed
    assert not compare(ref * (1 + 1e-3), ref).passed


def test_bfloat16_rounding_noise_passes_but_a_wrong_algorithm_does_not():
    ref64 = torch.randn(4096, dtype=torch.float64)
    ref = ref64.to(torch.bfloat16)
    noisy = (ref64 * (1 + 2e-3 * torch.randn(4096, dtype=torch.float64))).to(torch.bfloat16)
    good = compare(noisy, ref)
    assert good.passed, good.reason
    wrong = compare((ref64 * 1.05).to(torch.bfloat16), ref)
    assert not wrong.passed and "PSNR" in wrong.reason


def test_reference_tolerances_override_the_defaults():
    assert thresholds_for(torch.bfloat16, {"bfloat16": {"psnr": 10.0}})["psnr"] == 10.0
    assert thresholds_for(torch.float32, {torch.float32: {"atol": 1.0}})["atol"] == 1.0
    ref = torch.linspace(1, 2, 100)
    assert compare(ref + 0.5, ref, {"float32": {"atol": 1.0, "rtol": 0.0, "cossim": 0.9}}).passed


def test_integer_outputs_must_match_exactly():
    ref = torch.arange(10, dtype=torch.int32)
    assert compare(ref.clone(), ref).passed
    out = ref.clone()
    out[3] += 1
    assert not compare(out, ref).passed


def test_relative_error_is_floored_near_zero():
    ref = torch.tensor([1.0, 0.0])
    out = torch.tensor([1.0, 1e-40])
    c = compare(out, ref)
    assert c.figures["max_rel"] < 1e-30
    assert c.passed


def test_psnr_and_mse_agree_with_their_definitions():
    ref = torch.tensor([2.0, -4.0, 1.0, 0.5], dtype=torch.float64)
    out = ref + torch.tensor([0.1, -0.1, 0.0, 0.0], dtype=torch.float64)
    c = compare(out, ref)
    mse = (0.01 + 0.01) / 4
    assert c.figures["mse"] == pytest.approx(mse)
    assert c.figures["rmse"] == pytest.approx(math.sqrt(mse))
    assert c.figures["psnr"] == pytest.approx(10 * math.log10(16 / mse))


def test_float32_outputs_all_below_atol_pass_on_the_elementwise_check_with_a_no_signal_note():
    ref = torch.full((5,), -7e-9)  # erf-GELU's float64 answer where float32's erf saturates
    c = compare(torch.zeros(5), ref)
    assert c.passed, c.reason
    assert c.figures["cossim"] == 0.0  # the gate that used to fail it
    assert c.figures["no_signal"] is True and c.figures["noise_floor"] == 1e-5
    assert "below the noise floor: a zero kernel would pass it" in c.note


def test_below_the_noise_floor_the_elementwise_check_still_decides():
    c = compare(torch.full((4,), -1e-5), torch.full((4,), 1e-5))
    assert not c.passed and "beyond atol" in c.reason
    assert c.figures["no_signal"] is True


def test_an_output_with_one_value_above_the_noise_floor_keeps_every_gate():
    ref = torch.full((4,), 1e-6)
    ref[2] = 1e-3
    c = compare(torch.zeros(4), ref)
    assert not c.passed and "no_signal" not in c.figures and not c.note
    out = torch.zeros(4)
    out[0] = 2e-5  # the output's own magnitude counts too
    lifted = compare(out, torch.zeros(4))
    assert "no_signal" not in lifted.figures and not lifted.passed


def test_half_precision_values_a_few_rounding_steps_from_zero_pass_with_a_no_signal_note():
    ref = torch.full((6,), -1.19e-7, dtype=torch.float16)  # two subnormal steps
    out = torch.full((6,), -1.79e-7, dtype=torch.float16)  # three: 6 dB of PSNR
    c = compare(out, ref)
    assert c.passed, c.reason
    assert c.figures["psnr"] < 10 and c.figures["no_signal"] is True and c.note


def test_bfloat16_values_within_float32s_atol_of_zero_pass_with_a_no_signal_note():
    ref = torch.full((6,), -7e-9, dtype=torch.bfloat16)  # a normal bf16 value, 8 bits of it
    c = compare(torch.zeros(6, dtype=torch.bfloat16), ref)
    assert c.passed, c.reason
    assert c.figures["no_signal"] is True and c.figures["noise_floor"] == 1e-5


def test_low_precision_signal_above_the_floor_is_still_judged_by_psnr_and_cosine():
    ref = (torch.rand(4096, dtype=torch.float64) * 1e-3).to(torch.bfloat16)  # small but resolved
    c = compare(torch.zeros_like(ref), ref)
    assert not c.passed and "cosine similarity" in c.reason and "no_signal" not in c.figures
    fp16 = (torch.randn(4096, dtype=torch.float64) * 1e-3).to(torch.float16)
    assert not compare((fp16.double() * 1.05).to(torch.float16), fp16).passed


def test_fp8_values_within_two_subnormal_steps_of_zero_carry_no_signal():
    step = 2.0 ** -9  # float8_e4m3fn's smallest subnormal
    ref = torch.full((8,), step, dtype=torch.float64).to(torch.float8_e4m3fn)
    c = compare(torch.zeros(8, dtype=torch.float8_e4m3fn), ref)
    assert c.passed and c.figures["no_signal"] is True and c.figures["noise_floor"] == 2 * step
    wider = torch.full((8,), 8 * step, dtype=torch.float64).to(torch.float8_e4m3fn)
    assert not compare(torch.zeros(8, dtype=torch.float8_e4m3fn), wider).passed
