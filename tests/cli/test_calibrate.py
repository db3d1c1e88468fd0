"""``ktui calibrate``: it measures again, even where a calibration is kept, keeps the result in the
measuring host's per-user folder for every workspace, and replaces the device's entry in a workspace
file that holds one (which would otherwise win); a failed measurement says why. The GPU is the fake
of ``tests/fixtures/calibration/fake_gpu.py``, given through the measurement's seam."""

import json

import pytest
from conftest import FIXTURES, ktui, make_workspace

from ktui.measure import calibrate
from ktui.measure.calibrate import Calibration
from ktui.worker.timing.calibrate import MEASURE_ENV

FAKE_GPU = FIXTURES / "calibration" / "fake_gpu.py"


def measured(log):
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.worker
def test_ktui_calibrate_measures_again_and_keeps_it_for_every_workspace(tmp_path):
    log = tmp_path / "measured.log"
    env = {"KTUI_USER_DIR": str(tmp_path / "user"), MEASURE_ENV: str(FAKE_GPU), "FAKE_GPU_LOG": str(log)}
    root = make_workspace(tmp_path / "ws")
    kept = tmp_path / "user" / "calibration" / "NVIDIA_H200_driver_570.124.06.json"
    first = ktui("calibrate", "--time", "0.5", cwd=root, env=env)
    assert first.returncode == 0, first.stderr
    assert f"kept here in {kept}: every workspace's benchmarks use it on NVIDIA H200 (driver 570.124.06)" in first.stdout
    assert "launch floor         3.50 µs" in first.stdout
    assert f"  measuring NVIDIA H200 (driver 570.124.06) again, kept in {kept} for every workspace …" in first.stdout
    second = ktui("calibrate", "--json", cwd=root, env=env)
    assert second.returncode == 0, second.stderr
    assert len(measured(log)) == 2  # measured again though one was kept
    *steps, last = [json.loads(line) for line in second.stdout.splitlines()]
    assert steps and all(step["type"] == "calibrate_progress" and step["message"] for step in steps)  # the MCP tool's progress
    result = last
    assert result["path"] == str(kept) and result["workspace_path"] is None and result["launch_floor"]["floor_us"] == 3.5
    assert not (root / ".ktui" / "calibration.json").exists()  # no workspace file is made


@pytest.mark.worker
def test_ktui_calibrate_replaces_the_device_s_entry_in_a_workspace_file_that_holds_one(tmp_path):
    env = {"KTUI_USER_DIR": str(tmp_path / "user"), MEASURE_ENV: str(FAKE_GPU)}
    root = make_workspace(tmp_path / "ws")
    stale = Calibration("NVIDIA H200", "570.124.06", "nvml", "2026-11-30T06:46:19+00:00", "2.11.0", 4241.5)
    other = Calibration("NVIDIA A100-SXM4-80GB", "570.124.06", "nvml", "2026-11-30T06:46:19+00:00", "2.11.0", 1800.0)
    calibrate.save(root, stale)
    calibrate.save(root, other)
    proc = ktui("calibrate", cwd=root, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "also replaced in .ktui/calibration.json, which holds this device's entry and wins over the user's" in proc.stdout
    entry = calibrate.load(root, "NVIDIA H200", "570.124.06")
    assert entry.bandwidth_gbs == 4393.0 and entry.launch_floor["floor_us"] == 3.5
    assert calibrate.load(root, "NVIDIA A100-SXM4-80GB", "570.124.06") == other


@pytest.mark.worker
def test_ktui_calibrate_says_why_when_the_measurement_fails(tmp_path):
    env = {"KTUI_USER_DIR": str(tmp_path / "user"), MEASURE_ENV: str(FAKE_GPU), "FAKE_GPU_FAIL": "no memory left"}
    proc = ktui("calibrate", cwd=make_workspace(tmp_path / "ws"), env=env)
    assert proc.returncode == 2
    assert "calibrating NVIDIA H200 (driver 570.124.06) failed: RuntimeError: no memory left" in proc.stderr
    assert not (tmp_path / "user" / "calibration" / "NVIDIA_H200_driver_570.124.06.json").exists()
