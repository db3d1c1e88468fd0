"""The calibration cache: keyed by device and driver, preferred to the datasheet, honest when broken."""

import json

import pytest
from conftest import ktui, make_workspace

from ktui.loop.rungs.bench import ceilings
from ktui.measure import calibrate
from ktui.measure.calibrate import Calibration, CalibrationError


def h200(driver="570.124.06", bandwidth=4310.0, bf16=760.0) -> Calibration:
    return Calibration(device="NVIDIA H200", driver=driver, driver_source="nvml", date="2025-06-01T10:00:00+00:00",
                       torch="2.11.0", bandwidth_gbs=bandwidth, tflops={"bf16": bf16, "fp32": 51.0},
                       details={"copy": {"bytes_per_buffer": 1 << 30}})


def test_a_calibration_is_found_again_for_the_same_device_and_driver_only(tmp_path):
    path = calibrate.save(tmp_path, h200())
    assert path == tmp_path / ".ktui" / "calibration.json"
    assert calibrate.load(tmp_path, "NVIDIA H200", "570.124.06") == h200()
    assert calibrate.load(tmp_path, "NVIDIA H200", "575.51.03") is None
    assert calibrate.load(tmp_path, "NVIDIA H100 80GB HBM3", "570.124.06") is None


def test_saving_one_device_keeps_the_others_and_replaces_its_own(tmp_path):
    calibrate.save(tmp_path, h200())
    calibrate.save(tmp_path, h200(driver="575.51.03", bandwidth=4400.0))
    calibrate.save(tmp_path, h200(bandwidth=4200.0))
    data = json.loads((tmp_path / ".ktui" / "calibration.json").read_text())
    assert sorted(data) == ["NVIDIA H200 | driver 570.124.06", "NVIDIA H200 | driver 575.51.03"]
    assert calibrate.load(tmp_path, "NVIDIA H200", "570.124.06").bandwidth_gbs == 4200.0


def test_a_corrupt_file_is_reported_with_its_path_and_replaced_by_the_next_calibration(tmp_path):
    path = tmp_path / ".ktui" / "calibration.json"
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.raises(CalibrationError, match=r"calibration\.json.*ktui calibrate"):
        calibrate.load(tmp_path, "NVIDIA H200", "570.124.06")
    calibrate.save(tmp_path, h200())
    assert calibrate.load(tmp_path, "NVIDIA H200", "570.124.06").tflops["bf16"] == 760.0


def test_the_benchmark_prefers_the_calibration_and_says_so(tmp_path):
    ceiling, limit, note = ceilings("NVIDIA H200", tmp_path, "570.124.06")
    assert ceiling.bandwidth_gbs == 4800 and ceiling.source_of("bandwidth") == "datasheet NVIDIA H200 SXM 141GB"
    assert note == ""
    calibrate.save(tmp_path, h200())
    ceiling, limit, note = ceilings("NVIDIA H200", tmp_path, "570.124.06")
    assert ceiling.bandwidth_gbs == 4310 and ceiling.source_of("bandwidth") == "calibrated 2025-06-01"
    assert ceiling.tflops["bf16"] == 760 and ceiling.source_of("fp64").startswith("datasheet")
    assert limit.bandwidth_gbs == 4800  # "impossible" stays judged against the datasheet peak


def test_an_unreadable_calibration_falls_back_to_the_datasheet_with_a_note(tmp_path):
    (tmp_path / ".ktui").mkdir()
    (tmp_path / ".ktui" / "calibration.json").write_text("[]")
    ceiling, _, note = ceilings("NVIDIA H200", tmp_path, "570.124.06")
    assert ceiling.source_of("bandwidth").startswith("datasheet")
    assert note.startswith("calibration not used") and "JSON object" in note


def test_an_unknown_uncalibrated_device_gets_no_ceiling_and_is_told_how_to_get_one(tmp_path):
    ceiling, limit, note = ceilings("NVIDIA Quadro Mystery", tmp_path, "1.0")
    assert ceiling is None and limit is None and "ktui calibrate" in note


def test_describe_compares_each_ceiling_with_the_datasheet():
    lines = calibrate.describe(h200())
    assert lines[0].startswith("NVIDIA H200 · driver 570.124.06 (nvml)")
    assert any("copy bandwidth" in line and "90% of the datasheet 4800 GB/s" in line for line in lines)
    assert any("matmul bf16" in line and "77% of the datasheet 989.5" in line for line in lines)


def test_calibrate_on_a_machine_without_a_gpu_says_so(tmp_path):
    root = make_workspace(tmp_path / "ws")
    proc = ktui("calibrate", cwd=root)
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr
    assert not (root / ".ktui" / "calibration.json").exists()


def test_calibrate_outside_a_workspace_says_where_it_looked(tmp_path):
    proc = ktui("calibrate", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "no workspace found" in proc.stderr
