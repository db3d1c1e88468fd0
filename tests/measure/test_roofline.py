"""Roofline arithmetic, the impossible flag, the "done" threshold, and the datasheet table."""

import pytest

from ktui.measure import datasheets, roofline
from ktui.measure.roofline import Ceiling

pytestmark = pytest.mark.unit

# A made-up device with round numbers so every expected figure can be checked by hand.
SHEET = Ceiling("Test GPU", 1000.0, {"fp32": 50.0, "bf16": 500.0}, {"bandwidth": "datasheet T", "fp32": "datasheet T",
                                                                     "bf16": "datasheet T"})


def test_a_memory_bound_kernel_is_judged_by_bytes_over_bandwidth():
    # 1 GB at 1000 GB/s: a 1 ms floor; measured 1.25 ms → 80%, 800 GB/s achieved
    r = roofline.evaluate(1.25e-3, bytes_moved=1e9, flops=1e9, dtype="fp32", ceiling=SHEET)
    assert r.gbps == pytest.approx(800) and r.tflops == pytest.approx(0.8)
    assert r.bound == "memory-bound" and r.floor_s == pytest.approx(1e-3)
    assert r.fraction == pytest.approx(0.8)
    assert not r.at_roofline and not r.impossible
    assert "1000 GB/s" in r.ceiling and "datasheet T" in r.ceiling


def test_a_compute_bound_kernel_uses_the_rate_of_its_dtype():
    # 1e15 flops at 500 TFLOP/s (bf16): 2 s floor; at fp32's 50 TFLOP/s it would be 20 s
    r = roofline.evaluate(2.2, bytes_moved=1e9, flops=1e15, dtype="bf16", ceiling=SHEET)
    assert r.bound == "compute-bound" and r.floor_s == pytest.approx(2.0)
    assert r.fraction == pytest.approx(2.0 / 2.2)
    assert r.at_roofline  # 91% ≥ the default 90%
    assert "bf16 500.0 TFLOP/s" in r.ceiling


def test_the_larger_floor_decides():
    r = roofline.evaluate(1.0, bytes_moved=5e11, flops=1e13, dtype="fp32", ceiling=SHEET)  # 0.5 s vs 0.2 s
    assert r.bound == "memory-bound" and r.fraction == pytest.approx(0.5)


@pytest.mark.parametrize("done, at", [(0.9, True), (0.95, False), (0.5, True)])
def test_the_done_threshold_is_configurable(done, at):
    r = roofline.evaluate(1.08e-3, bytes_moved=1e9, flops=None, dtype=None, ceiling=SHEET, done=done)
    assert r.at_roofline is at


def test_faster_than_the_datasheet_floor_is_impossible_not_celebrated():
    r = roofline.evaluate(0.8e-3, bytes_moved=1e9, flops=None, dtype="fp32", ceiling=SHEET, limit=SHEET)
    assert r.impossible and not r.at_roofline
    assert r.fraction == pytest.approx(1.25)
    assert r.impossible_floor_s == pytest.approx(1e-3)


def test_beating_a_calibrated_ceiling_is_not_impossible_below_the_datasheet_peak():
    calibrated = Ceiling("Test GPU", 900.0, {}, {"bandwidth": "calibrated 2025-01-01"})
    ceiling = roofline.choose_ceiling("Test GPU", None, calibrated)
    r = roofline.evaluate(1.05e-3, bytes_moved=1e9, flops=None, dtype="fp32", ceiling=ceiling, limit=SHEET)
    assert r.fraction == pytest.approx((1e9 / 900e9) / 1.05e-3)  # 106% of the calibrated copy rate
    assert not r.impossible and r.at_roofline
    assert "calibrated" in r.ceiling


def test_hot_cache_timing_is_never_called_impossible():
    r = roofline.evaluate(0.1e-3, bytes_moved=1e9, flops=None, dtype=None, ceiling=SHEET, limit=SHEET,
                          check_impossible=False)
    assert not r.impossible and r.fraction == pytest.approx(10.0)


def test_without_a_ceiling_only_achieved_rates_are_reported():
    r = roofline.evaluate(1e-3, bytes_moved=2e9, flops=4e9, dtype="fp32", ceiling=None)
    assert r.gbps == pytest.approx(2000) and r.tflops == pytest.approx(4)
    assert r.fraction is None and r.figures() == {"gbps": pytest.approx(2000), "tflops": pytest.approx(4)}


def test_a_dtype_without_a_rate_leaves_only_the_memory_floor():
    r = roofline.evaluate(2e-3, bytes_moved=1e9, flops=1e18, dtype="fp8", ceiling=SHEET)
    assert r.bound == "memory-bound" and r.fraction == pytest.approx(0.5)


def test_figures_carry_the_fraction_the_attainable_time_the_bound_and_the_ceiling_used():
    f = roofline.evaluate(2e-3, bytes_moved=1e9, flops=None, dtype=None, ceiling=SHEET).figures()
    assert f["roofline"] == pytest.approx(0.5) and f["attainable_us"] == pytest.approx(1000)
    assert f["bound"] == "memory-bound" and f["ceiling"].startswith("1000 GB/s")
    assert f["roofline_model"] == roofline.NO_LAUNCH_FLOOR and "launch_floor_us" not in f
    assert f["at_roofline"] is False and f["impossible"] is False


def test_a_non_positive_time_is_rejected():
    with pytest.raises(ValueError, match="positive"):
        roofline.evaluate(0.0, 1.0, None, None, SHEET)


def test_calibrated_rates_replace_the_datasheet_part_by_part():
    spec = datasheets.lookup("NVIDIA H200")
    calibrated = Ceiling("NVIDIA H200", 4300.0, {"bf16": 750.0}, {"bandwidth": "calibrated X", "bf16": "calibrated X"})
    c = roofline.choose_ceiling("NVIDIA H200", spec, calibrated)
    assert c.bandwidth_gbs == 4300 and c.tflops["bf16"] == 750 and c.tflops["fp32"] == 67
    assert c.source_of("bandwidth") == "calibrated X" and c.source_of("fp32").startswith("datasheet")
    assert roofline.choose_ceiling("Unknown", None, None) is None


def test_without_a_datasheet_entry_impossible_allows_a_margin_over_the_calibration():
    calibrated = Ceiling("Odd GPU", 1000.0, {"fp32": 10.0}, {"bandwidth": "calibrated", "fp32": "calibrated"})
    limit = roofline.impossibility_limit(None, calibrated)
    assert limit.bandwidth_gbs == pytest.approx(1000 * roofline.CALIBRATED_IMPOSSIBLE_MARGIN)
    assert roofline.impossibility_limit(datasheets.lookup("NVIDIA H200"), calibrated).bandwidth_gbs == 4800


@pytest.mark.parametrize("dtype, key", [
    ("torch.float32", "fp32"), ("float32", "fp32"), ("bfloat16", "bf16"), ("torch.float16", "fp16"),
    ("torch.float64", "fp64"), ("torch.float8_e4m3fn", "fp8"), ("float8_e5m2", "fp8"), ("torch.int32", None),
])
def test_dtype_names_map_to_ceiling_keys(dtype, key):
    assert roofline.dtype_key(dtype) == key


@pytest.mark.parametrize("reported, canonical", [
    ("NVIDIA H200", "NVIDIA H200 SXM 141GB"),
    ("NVIDIA H200 NVL", "NVIDIA H200 NVL"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM 80GB"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB SXM"),
    ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 40GB PCIe"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe"),
    ("NVIDIA B200", "NVIDIA B200"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090"),
])
def test_device_names_as_drivers_report_them_find_their_datasheet(reported, canonical):
    assert datasheets.lookup(reported).name == canonical


@pytest.mark.parametrize("reported", [
    "NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA GeForce RTX 4090 D", "NVIDIA L40", "NVIDIA GB200", "Tesla T4", "",
])
def test_other_devices_and_variants_with_other_peaks_are_not_guessed(reported):
    assert datasheets.lookup(reported) is None


def test_every_datasheet_entry_is_complete_and_dense():
    for spec in datasheets.TABLE:
        assert spec.bandwidth_gbs > 0 and spec.source
        for key in ("fp64", "fp32", "tf32", "fp16", "bf16"):
            assert spec.tflops[key] > 0, (spec.name, key)
        assert spec.tflops["fp16"] >= spec.tflops["tf32"] >= spec.tflops["fp32"] / 2
        if "fp8" in spec.tflops:
            assert spec.tflops["fp8"] >= spec.tflops["fp16"]
    h200 = datasheets.lookup("NVIDIA H200")
    assert h200.tflops["bf16"] == pytest.approx(1979 / 2) and h200.bandwidth_gbs == 4800 and h200.l2_mb == 50
