"""The launch floor in the roofline: recorded H200 timings judged launch-, memory- or compute-bound,
the model fitted to timed copies across sizes, and old calibrations that have no floor.

Where the numbers come from (NVIDIA H200, driver 580.159.04, torch 2.11, Triton 3.6):
- ``ISSUE_ADD``: ``ktui run kernels/add_triton.py`` on 2026-12-02 (issue 29): fp32 add of
  65536, 4194304 and 67108864 elements, 3.81, 14.3 and 183.8 µs;
- ``FIDELITY_ADD``: the same add at 1, 16, 64, 256 and 1024 Mi elements, docs/measured.md
  ("Timer fidelity", 2026-11-30): 6.46, 46.24, 183.41, 734.48, 2937.82 µs;
- the bandwidth mixes (copy 4250, add 4364, read-only sum 4550 GB/s) and the bf16 matmul rate
  (740.2 TFLOP/s) from the calibrations in docs/measured/log/ ("Calibration" and the suite's notes);
- the bf16 matmul at 4096³: 739 TFLOP/s (docs/measured/log/, the suite at the roofline), 185.9 µs;
- ``FLOOR_US``, 3.5 µs, is not a recorded figure: no launch floor had been measured when these were
  written. It is below the smallest recorded kernel time (3.81 µs for 786 KB, whose transfer alone is
  0.18 µs); the H200 run of ``ktui calibrate`` measures the real one.
"""

import json

import pytest

from ktui.measure import calibrate, launchfloor, roofline
from ktui.measure.calibrate import Calibration, DeviceIdentity
from ktui.measure.roofline import Ceiling, LaunchFloor, Mix
from ktui.worker.rungs.bench import ceilings


def workspace_ceilings(device, root, driver):
    """The benchmark's ceilings from the calibration ``root`` keeps (else the user's, else the datasheet)."""
    return ceilings(device, calibrate.find(root, DeviceIdentity(device, driver)))

pytestmark = pytest.mark.unit

FLOOR_US = 3.5
ADD_GBS, COPY_GBS, BF16_TFLOPS = 4364.0, 4250.0, 740.2
ADD_BYTES = {65536: 12 * 65536, 4194304: 12 * 4194304, 67108864: 12 * 67108864}  # 2 reads + 1 write of fp32
ISSUE_ADD = {65536: 3.81, 4194304: 14.3, 67108864: 183.8}
FIDELITY_ADD = {1 << 20: 6.46, 1 << 24: 46.24, 1 << 26: 183.41, 1 << 28: 734.48, 1 << 30: 2937.82}


def h200_ceiling(model: str | None) -> Ceiling:
    launch = LaunchFloor(FLOOR_US * 1e-6, model, "calibrated 2026-12-02") if model else None
    return Ceiling("NVIDIA H200", ADD_GBS, {"bf16": BF16_TFLOPS}, {"bandwidth": "calibrated 2026-12-02",
                                                                      "bf16": "calibrated 2026-12-02"},
                   (Mix("1:1 copy", 0.5, COPY_GBS), Mix("2-read-1-write add", 2 / 3, ADD_GBS)), launch)


def add(elements: int, model: str | None = roofline.MODEL_MAX) -> roofline.Roofline:
    return roofline.evaluate(ISSUE_ADD[elements] * 1e-6, ADD_BYTES[elements], None, "fp32", h200_ceiling(model))


def test_a_small_add_at_the_launch_floor_is_launch_bound_not_four_percent_of_anything():
    r = add(65536)
    assert r.bound == "launch-bound" and r.floor_s == pytest.approx(3.5e-6)
    assert r.fraction == pytest.approx(3.5 / 3.81)  # 92%, where bytes / bandwidth alone said 4.7%
    assert r.at_roofline and "launch floor 3.50 µs (calibrated 2026-12-02)" in r.ceiling
    f = r.figures()
    assert f["bound"] == "launch-bound" and f["launch_floor_us"] == pytest.approx(3.5)
    assert f["roofline_model"] == "max(launch floor, bytes/bandwidth, flops/rate)"


def test_a_large_add_is_memory_bound_against_its_calibrated_mix():
    r = add(67108864)
    assert r.bound == "memory-bound" and r.floor_s == pytest.approx(ADD_BYTES[67108864] / (ADD_GBS * 1e9))
    assert r.fraction == pytest.approx(1.004, abs=0.001) and "4364 GB/s" in r.ceiling


def test_under_the_sum_model_the_floor_adds_to_the_transfer():
    r = add(4194304, roofline.MODEL_SUM)
    transfer = ADD_BYTES[4194304] / (ADD_GBS * 1e9)
    assert r.bound == "memory-bound" and r.floor_s == pytest.approx(3.5e-6 + transfer)
    assert r.fraction == pytest.approx((3.5e-6 + transfer) / 14.3e-6)
    assert add(4194304).fraction == pytest.approx(transfer / 14.3e-6)  # 81% under the max model


def test_a_bf16_gemm_is_compute_bound():
    flops, moved = 2 * 4096**3, 3 * 4096 * 4096 * 2
    r = roofline.evaluate(185.9e-6, moved, flops, "bf16", h200_ceiling(roofline.MODEL_MAX))
    assert r.bound == "compute-bound" and r.fraction == pytest.approx(flops / 740.2e12 / 185.9e-6)
    assert "bf16 740.2 TFLOP/s" in r.ceiling


def test_without_a_calibrated_floor_the_figures_name_the_fallback():
    r = add(65536, model=None)
    assert r.bound == "memory-bound" and r.fraction == pytest.approx(ADD_BYTES[65536] / (ADD_GBS * 1e9) / 3.81e-6)
    assert r.figures()["roofline_model"].startswith("no launch floor calibrated: run ktui calibrate")


def test_the_launch_floor_is_no_peak_a_kernel_could_be_impossible_against():
    sheet = roofline.datasheet_ceiling(roofline_spec())
    r = roofline.evaluate(3.81e-6, ADD_BYTES[65536], None, "fp32", h200_ceiling(roofline.MODEL_SUM), limit=sheet)
    assert not r.impossible and r.fraction > 0.9


def roofline_spec():
    from ktui.measure.datasheets import lookup

    return lookup("NVIDIA H200")


def recorded_streams() -> list[dict[str, float]]:
    """The add's recorded times at seven sizes, as the fit takes them (bytes moved, measured µs);
    64 Mi elements is in both records (183.8 and 183.41 µs): the timer-fidelity figure is kept."""
    times = {**{12 * n: us for n, us in ISSUE_ADD.items()}, **{12 * n: us for n, us in FIDELITY_ADD.items()}}
    return [{"bytes": b, "measured_us": us} for b, us in times.items()]


def test_the_fit_picks_floor_plus_transfer_on_the_recorded_h200_adds():
    fitted = launchfloor.fit(recorded_streams(), FLOOR_US * 1e-6, ADD_GBS)
    assert fitted["model"] == "sum"
    assert fitted["rms_log_error"]["sum"] < 0.05 < 0.2 < fitted["rms_log_error"]["max"]
    by_size = {row["bytes"]: row for row in fitted["copies"]}
    middle = by_size[12 << 20]  # 12.6 MB: 6.46 µs measured; max(3.5, 2.88) under-predicts by 46%
    assert middle["max_residual"] == pytest.approx(3.5 / 6.46 - 1, abs=1e-3)
    assert middle["sum_residual"] == pytest.approx((3.5 + 12 * 2**20 / 4364e3) / 6.46 - 1, abs=1e-3)
    assert [row["bytes"] for row in fitted["copies"]] == sorted(by_size)


def test_the_fit_picks_the_larger_of_floor_and_transfer_where_that_fits_better():
    # made-up copies that take exactly max(3.5 µs, bytes / 4364 GB/s)
    copies = [{"bytes": b, "measured_us": max(FLOOR_US, b / 4364e3)} for b in (8 << 10, 2 << 20, 64 << 20, 2 << 30)]
    fitted = launchfloor.fit(copies, FLOOR_US * 1e-6, ADD_GBS)
    assert fitted["model"] == "max" and fitted["rms_log_error"]["max"] == pytest.approx(0)


def test_the_floor_is_the_slower_of_the_empty_kernel_and_the_tiny_copy():
    entry = launchfloor.record(2.4, 3.5, recorded_streams(), ADD_GBS)
    assert entry["floor_us"] == 3.5 and entry["empty_us"] == 2.4 and entry["model"] == "sum"
    assert launchfloor.from_record(entry, "calibrated X") == LaunchFloor(3.5e-6, "sum", "calibrated X")
    assert launchfloor.from_record({}, "calibrated X") is None
    assert launchfloor.from_record({"error": "RuntimeError: boom"}, "calibrated X") is None


def h200(launch_floor: dict) -> Calibration:
    return Calibration(device="NVIDIA H200", driver="580.159.04", driver_source="nvml",
                       date="2026-12-02T05:00:00+00:00", torch="2.11.0", bandwidth_gbs=4250.0, tflops={"bf16": 740.2},
                       details={}, launch_floor=launch_floor)


def test_a_stored_floor_reaches_the_benchmark_ceiling(tmp_path):
    calibrate.save(tmp_path, h200(launchfloor.record(2.4, 3.5, recorded_streams(), ADD_GBS)))
    ceiling, _, note = workspace_ceilings("NVIDIA H200", tmp_path, "580.159.04")
    assert note == "" and ceiling.launch == LaunchFloor(3.5e-6, "sum", "calibrated 2026-12-02")
    assert ceiling.for_reads(2 / 3).launch == ceiling.launch


def test_a_calibration_saved_before_the_floor_loads_and_has_none(tmp_path):
    old = {k: v for k, v in h200({}).__dict__.items() if k != "launch_floor"}
    (tmp_path / ".ktui").mkdir()
    (tmp_path / ".ktui" / "calibration.json").write_text(json.dumps({"NVIDIA H200 | driver 580.159.04": old}))
    ceiling, _, note = workspace_ceilings("NVIDIA H200", tmp_path, "580.159.04")
    assert note == "" and ceiling.bandwidth_gbs == 4250.0 and ceiling.launch is None
    lines = calibrate.describe(calibrate.load(tmp_path, "NVIDIA H200", "580.159.04"))
    assert any("launch floor" in line and "run ktui calibrate" in line for line in lines)


def test_calibrate_shows_the_floor_and_each_size_s_residuals():
    lines = calibrate.describe(h200(launchfloor.record(2.4, 3.5, recorded_streams(), ADD_GBS)))
    text = "\n".join(lines)
    assert "launch floor         3.50 µs (empty kernel 2.40 µs" in text
    assert "model sum: attainable = floor + bytes/bandwidth" in text
    assert "12 MiB moved       6.46 µs measured  max      3.50 (-45.8%)" in text
    assert len([line for line in lines if "µs measured" in line]) == 7  # 64 Mi is in both records: one row


def test_a_failed_floor_measurement_is_said_not_hidden():
    assert calibrate.describe(h200({"error": "RuntimeError: boom"}))[-1] == "  launch floor     not measured: RuntimeError: boom"
