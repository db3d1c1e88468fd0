"""The calibration cache: keyed by device and driver, preferred to the datasheet, honest when broken."""

import json

import pytest
from conftest import ktui, make_workspace

from ktui.measure import bandwidth, calibrate
from ktui.measure.calibrate import Calibration, CalibrationError, DeviceIdentity
from ktui.measure.roofline import evaluate
from ktui.worker.rungs.bench import ceilings


def workspace_ceilings(device, root, driver):
    """The benchmark's ceilings from the calibration ``root`` keeps (else the user's, else the datasheet)."""
    return ceilings(device, calibrate.find(root, DeviceIdentity(device, driver)))


def h200(driver="570.124.06", bandwidth=4310.0, bf16=760.0) -> Calibration:
    return Calibration(device="NVIDIA H200", driver=driver, driver_source="nvml", date="2025-06-01T10:00:00+00:00",
                       torch="2.11.0", bandwidth_gbs=bandwidth, tflops={"bf16": bf16, "fp32": 51.0},
                       details={"copy": {"bytes_per_buffer": 1 << 30}})


@pytest.mark.unit
def test_a_calibration_is_found_again_for_the_same_device_and_driver_only(tmp_path):
    path = calibrate.save(tmp_path, h200())
    assert path == tmp_path / ".ktui" / "calibration.json"
    assert calibrate.load(tmp_path, "NVIDIA H200", "570.124.06") == h200()
    assert calibrate.load(tmp_path, "NVIDIA H200", "575.51.03") is None
    assert calibrate.load(tmp_path, "NVIDIA H100 80GB HBM3", "570.124.06") is None


@pytest.mark.unit
def test_saving_one_device_keeps_the_others_and_replaces_its_own(tmp_path):
    calibrate.save(tmp_path, h200())
    calibrate.save(tmp_path, h200(driver="575.51.03", bandwidth=4400.0))
    calibrate.save(tmp_path, h200(bandwidth=4200.0))
    data = json.loads((tmp_path / ".ktui" / "calibration.json").read_text())
    assert sorted(data) == ["NVIDIA H200 | driver 570.124.06", "NVIDIA H200 | driver 575.51.03"]
    assert calibrate.load(tmp_path, "NVIDIA H200", "570.124.06").bandwidth_gbs == 4200.0


@pytest.mark.unit
def test_a_corrupt_file_is_reported_with_its_path_and_replaced_by_the_next_calibration(tmp_path):
    path = tmp_path / ".ktui" / "calibration.json"
    path.parent.mkdir()
    path.write_text("{not json")
    with pytest.raises(CalibrationError, match=r"calibration\.json.*ktui calibrate"):
        calibrate.load(tmp_path, "NVIDIA H200", "570.124.06")
    calibrate.save(tmp_path, h200())
    assert calibrate.load(tmp_path, "NVIDIA H200", "570.124.06").tflops["bf16"] == 760.0


@pytest.mark.unit
def test_the_benchmark_prefers_the_calibration_and_says_so(tmp_path):
    ceiling, limit, note = workspace_ceilings("NVIDIA H200", tmp_path, "570.124.06")
    assert ceiling.bandwidth_gbs == 4800 and ceiling.source_of("bandwidth") == "datasheet NVIDIA H200 SXM 141GB"
    assert note == ""
    calibrate.save(tmp_path, h200())
    ceiling, limit, note = workspace_ceilings("NVIDIA H200", tmp_path, "570.124.06")
    assert ceiling.bandwidth_gbs == 4310 and ceiling.source_of("bandwidth") == "calibrated 2025-06-01"
    assert ceiling.tflops["bf16"] == 760 and ceiling.source_of("fp64").startswith("datasheet")
    assert limit.bandwidth_gbs == 4800  # "impossible" stays judged against the datasheet peak


@pytest.mark.unit
def test_an_unreadable_calibration_falls_back_to_the_datasheet_with_a_note(tmp_path):
    (tmp_path / ".ktui").mkdir()
    (tmp_path / ".ktui" / "calibration.json").write_text("[]")
    ceiling, _, note = workspace_ceilings("NVIDIA H200", tmp_path, "570.124.06")
    assert ceiling.source_of("bandwidth").startswith("datasheet")
    assert note.startswith("the workspace's calibration not used") and "JSON object" in note


@pytest.mark.unit
def test_an_unknown_uncalibrated_device_gets_no_ceiling_and_is_told_how_to_get_one(tmp_path):
    ceiling, limit, note = workspace_ceilings("NVIDIA Quadro Mystery", tmp_path, "1.0")
    assert ceiling is None and limit is None and "ktui calibrate" in note


@pytest.mark.unit
def test_describe_compares_each_ceiling_with_the_datasheet():
    lines = calibrate.describe(h200())
    assert lines[0].startswith("NVIDIA H200 · driver 570.124.06 (nvml)")
    assert any("copy bandwidth" in line and "90% of the datasheet 4800 GB/s" in line for line in lines)
    assert any("matmul bf16" in line and "77% of the datasheet 989.5" in line for line in lines)


@pytest.mark.worker
def test_calibrate_on_a_machine_without_a_gpu_says_so(tmp_path):
    root = make_workspace(tmp_path / "ws")
    proc = ktui("calibrate", cwd=root)
    assert proc.returncode == 2 and "needs a CUDA GPU" in proc.stderr
    assert not (root / ".ktui" / "calibration.json").exists()


@pytest.mark.worker
def test_calibrate_outside_a_workspace_says_where_it_looked(tmp_path):
    proc = ktui("calibrate", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "no workspace found" in proc.stderr


SAVED_BEFORE_THE_PATTERNS = {  # an entry as ktui calibrate wrote it when only the copy was measured
    "bandwidth_gbs": 4241.5, "date": "2026-11-30T06:46:19+00:00", "device": "NVIDIA H200", "driver": "580.159.04",
    "driver_source": "nvml", "tflops": {"bf16": 740.2}, "torch": "2.11.0+cu130",
    "details": {"clock_source": "nvml", "copy": {"bytes_per_buffer": 1 << 30, "counted_bytes": 2 << 30,
                                                 "kernel": "torch copy_", "median_us": 506.3, "rse": 0.0009,
                                                 "samples": 10, "stop": "noise"},
                "copy_each_gbs": {"torch copy_": 4241.5, "triton block=16KiB warps=4": 4073.0},
                "copy_torch_gbs": 4241.5, "copy_triton_gbs": 4073.0},
}


@pytest.mark.unit
def test_a_calibration_saved_before_the_patterns_still_loads_and_reads_as_a_copy(tmp_path):
    (tmp_path / ".ktui").mkdir()
    (tmp_path / ".ktui" / "calibration.json").write_text(json.dumps(
        {"NVIDIA H200 | driver 580.159.04": SAVED_BEFORE_THE_PATTERNS}))
    ceiling, _, note = workspace_ceilings("NVIDIA H200", tmp_path, "580.159.04")
    assert note == "" and ceiling.bandwidth_gbs == 4241.5 and ceiling.source_of("bandwidth") == "calibrated 2026-11-30"
    lines = calibrate.describe(calibrate.load(tmp_path, "NVIDIA H200", "580.159.04"))
    assert any(line.startswith("  copy bandwidth       4242 GB/s = 88%") and "torch copy_" in line for line in lines)
    assert any("Triton copy" in line and "4073 GB/s" in line for line in lines)


def measured_patterns() -> dict:
    size = 1 << 30

    def figures(title, kernel, gbs, read, written, **more):
        return {"title": title, "kernel": kernel, "gbs": gbs, "bytes_read": read, "bytes_written": written,
                "counted_bytes": read + written, "median_us": (read + written) / gbs / 1e3, "rse": 0.001,
                "samples": 10, **more}

    return {
        "copy": figures("1:1 copy", "torch copy_", 4242.0, size, size, reads=1, writes=1,
                        each_gbs={"torch copy_": 4242.0, "triton block=8KiB warps=4": 4150.0}),
        "add": figures("2-read-1-write add", "triton block=4KiB warps=4", 4393.0, 2 * size, size, reads=2, writes=1,
                       each_gbs={"triton block=4KiB warps=4": 4393.0}),
        "sum": {"title": "read-only sum", "reads": 1, "writes": 0,
                "error": "triton block=16KiB warps=8 persistent 4/SM: OutOfResources: shared memory"},
    }


@pytest.mark.unit
def test_the_ceiling_figure_names_the_access_pattern_that_set_it(tmp_path):
    details = {}
    best = bandwidth.record(1 << 30, measured_patterns(), details)
    assert best == 4393.0 and details["bandwidth"]["pattern"] == "add"
    calibrate.save(tmp_path, Calibration(
        device="NVIDIA H200", driver="580.159.04", driver_source="nvml", date="2026-12-01T10:00:00+00:00",
        torch="2.11.0", bandwidth_gbs=best, tflops={"bf16": 740.0}, details=details))
    ceiling, _, _ = workspace_ceilings("NVIDIA H200", tmp_path, "580.159.04")
    assert ceiling.source_of("bandwidth") == "calibrated 2026-12-01, 2-read-1-write add"
    roof = evaluate(3 * (1 << 28) * 4 / 4393e9, 3 * (1 << 28) * 4, None, "fp32", ceiling)
    assert roof.fraction == pytest.approx(1.0) and roof.ceiling == "4393 GB/s (calibrated 2026-12-01, 2-read-1-write add)"


@pytest.mark.unit
def test_describe_lists_every_pattern_labelled_and_marks_the_ceiling():
    details = {}
    best = bandwidth.record(1 << 30, measured_patterns(), details)
    lines = calibrate.describe(Calibration(device="NVIDIA H200", driver="580.159.04", driver_source="nvml",
                                           date="2026-12-01T10:00:00+00:00", torch="2.11.0", bandwidth_gbs=best,
                                           details=details))
    head = next(line for line in lines if "memory bandwidth" in line)
    assert "4393 GB/s = 92% of the datasheet 4800 GB/s" in head and "2-read-1-write add" in head
    add = next(line for line in lines if line.strip().startswith("2-read-1-write add"))
    assert "4393 GB/s" in add and "3.00 GiB counted" in add and add.endswith("← highest")
    copy = next(line for line in lines if line.strip().startswith("1:1 copy"))
    assert "4242 GB/s" in copy and "torch copy_" in copy and "highest" not in copy
    assert lines[-2].strip() == "each benchmark is held to the pattern at or just above its own share of reads"
    assert lines[-1].strip().startswith("launch floor     not calibrated")  # this calibration predates it
    assert any(line.strip().startswith("read-only sum") and "not measured: triton" in line for line in lines)
    assert any("Triton copy" in line and "4150 GB/s" in line for line in lines)


def all_patterns() -> dict:
    patterns = measured_patterns()
    patterns["sum"] = {"title": "read-only sum", "kernel": "triton block=64KiB warps=16", "gbs": 4551.0,
                       "reads": 1, "writes": 0}
    return patterns


def saved_ceiling(tmp_path, patterns):
    details = {}
    best = bandwidth.record(1 << 30, patterns, details)
    calibrate.save(tmp_path, Calibration(
        device="NVIDIA H200", driver="580.159.04", driver_source="nvml", date="2026-12-01T10:00:00+00:00",
        torch="2.11.0", bandwidth_gbs=best, tflops={"bf16": 740.0}, details=details))
    return workspace_ceilings("NVIDIA H200", tmp_path, "580.159.04")[0]


@pytest.mark.unit
def test_a_kernel_is_held_to_the_calibrated_mix_at_or_above_its_share_of_reads(tmp_path):
    ceiling = saved_ceiling(tmp_path, all_patterns())
    assert ceiling.bandwidth_gbs == 4551.0  # the calibration's one figure is its highest
    half = ceiling.for_reads(0.5)  # softmax, RMSNorm: as many bytes written as read
    assert half.bandwidth_gbs == 4242.0 and half.source_of("bandwidth") == "calibrated 2026-12-01, 1:1 copy for 50% reads"
    assert ceiling.for_reads(0.66).bandwidth_gbs == 4393.0  # an add, its share estimated a little low
    assert ceiling.for_reads(0.8).bandwidth_gbs == 4551.0  # more reads than the add: only the sum bounds it
    assert ceiling.for_reads(0.2).bandwidth_gbs == 4242.0  # write-heavy: the copy, the lowest share measured
    assert ceiling.for_reads(None) is ceiling
    assert ceiling.tflops == half.tflops  # compute ceilings do not depend on the mix


@pytest.mark.unit
def test_a_softmax_at_copy_speed_reads_as_at_the_roofline_not_below_the_read_only_sum(tmp_path):
    ceiling = saved_ceiling(tmp_path, all_patterns())
    moved = 2 * (1 << 28) * 4
    roof = evaluate(moved / 4242e9, moved, None, "fp32", ceiling.for_reads(0.5))
    assert roof.fraction == pytest.approx(1.0)
    assert evaluate(moved / 4242e9, moved, None, "fp32", ceiling).fraction == pytest.approx(4242 / 4551)


@pytest.mark.unit
def test_without_the_sum_a_read_heavy_kernel_is_held_to_the_fastest_mix_measured(tmp_path):
    ceiling = saved_ceiling(tmp_path, measured_patterns())  # the sum failed to run
    assert ceiling.for_reads(0.9).bandwidth_gbs == 4393.0


@pytest.mark.unit
def test_a_calibration_saved_before_the_patterns_holds_every_kernel_to_its_one_figure(tmp_path):
    (tmp_path / ".ktui").mkdir()
    (tmp_path / ".ktui" / "calibration.json").write_text(json.dumps(
        {"NVIDIA H200 | driver 580.159.04": SAVED_BEFORE_THE_PATTERNS}))
    ceiling, _, _ = workspace_ceilings("NVIDIA H200", tmp_path, "580.159.04")
    assert ceiling.for_reads(0.5) is ceiling and ceiling.for_reads(1.0).bandwidth_gbs == 4241.5


@pytest.mark.unit
def test_the_read_share_counts_input_tensors_against_the_output():
    import torch

    from ktui.worker.rungs.bench import read_share

    x, y = torch.empty(1000), torch.empty(1000)
    assert read_share((x, y), torch.empty(1000)) == pytest.approx(2 / 3)
    assert read_share((x, 3.0), torch.empty(1000)) == pytest.approx(0.5)
    assert read_share((x,), torch.empty(())) == pytest.approx(1000 / 1001)
    assert read_share((), None) is None
