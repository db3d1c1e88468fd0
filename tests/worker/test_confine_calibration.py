"""A kernel under test cannot forge the GPU's calibration — the launch floor and ceilings every later
verdict on that GPU kind is held to, for every workspace of the user: its worker reads the user's
calibrations and cannot write them. The first benchmark on an uncalibrated GPU still has one
measured, once, by a process its parent starts beside it, not confined, and reads back what it kept.

A real worker of ``ktui run`` (CPU tier: no benchmark runs here, so the kernel asks as the benchmark
rung does, through the worker's own ``Parent``: ``tests/fixtures/hacks/forges_calibration.py``); the
GPU is the fake of ``tests/fixtures/calibration/fake_gpu.py`` at the calibration's seam
(``KTUI_CALIBRATION_MEASURE``), which both the worker and the measuring process honour."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import FIXTURES, finished, ktui, make_workspace, parse_events

from ktui.measure.calibrate import Calibration
from ktui.worker.confine import landlock_abi
from ktui.worker.timing.calibrate import MEASURE_ENV

pytestmark = pytest.mark.worker


def _abi() -> int:
    try:
        return landlock_abi()
    except OSError:
        return 0


needs_landlock = pytest.mark.skipif(_abi() < 1, reason="this kernel has no Landlock")


def forge(tmp_path, **env) -> tuple[dict, list[str], dict]:
    """Run the forging kernel in a fresh per-user folder: what it reported, the fake GPU's log (one
    line per measurement: the measuring pid and key) and its run's last event."""
    root = make_workspace(tmp_path / "ws", hacks=["forges_calibration"])
    shutil.copy(FIXTURES / "calibration" / "fake_gpu.py", root / "fake_gpu.py")  # readable by the worker: its workspace
    (tmp_path / "log").mkdir()  # a folder the worker may not write
    log = tmp_path / "log" / "measured.log"
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "kernels/hack_forges_calibration.py", cwd=root,
                env={"KTUI_USER_DIR": str(tmp_path / "user"), MEASURE_ENV: str(root / "fake_gpu.py"),
                     "FAKE_GPU_LOG": str(log), **env})
    events = parse_events(proc.stdout)
    said = [e["text"] for e in events if e["type"] == "output" and e["text"].startswith("FORGE ")]
    assert said, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(said[0].removeprefix("FORGE ")), log.read_text().splitlines() if log.exists() else [], \
        finished(events)


@needs_landlock
def test_a_kernel_cannot_write_the_user_s_calibrations_and_its_first_one_is_measured_once_outside_its_sandbox(
        tmp_path):
    report, log, last = forge(tmp_path)
    kept = tmp_path / "user" / "calibration" / "NVIDIA_H200_driver_570.124.06.json"
    assert last["summary"]["confined"] is True and report["kept"] == str(kept)
    # nothing of the folder is the worker's to write: not before there is a calibration, not after
    assert report["write_before"] == report["mkdir"] == "PermissionError"
    assert report["write_after"] == report["replace_after"] == "PermissionError"
    assert "ask_error" not in report, report["ask_error"]
    assert report["read_after"] == "ok"  # what was kept, it reads
    # asked for, it was measured once, by a process that writes where the worker may not (the log)
    assert report["log"] == "PermissionError"
    assert len(log) == 1
    measuring_pid, key = log[0].split(" ", 1)
    assert key == "NVIDIA H200 | driver 570.124.06" and int(measuring_pid) != report["pid"]
    first, second = report["asked"]
    assert first == {"path": str(kept), "measured": True, "note": "", "key": "NVIDIA H200 | driver 570.124.06"}
    assert second == {**first, "measured": False}  # read back from the user's folder, not measured again
    assert report["steps"][0] == f"measuring NVIDIA H200 (driver 570.124.06) once, kept in {kept} for every workspace"
    assert "launch floor: an empty kernel" in report["steps"]  # each step reached the worker as it came
    kept_now = Calibration(**json.loads(kept.read_text()))
    assert kept_now.bandwidth_gbs == 4393.0 and kept_now.launch_floor["floor_us"] == 3.5  # the measured one, not forged
    assert not (tmp_path / "ws" / ".ktui" / "calibration.json").exists()


def test_a_measurement_that_fails_is_told_to_the_worker_and_nothing_is_kept(tmp_path):
    report, log, last = forge(tmp_path, FAKE_GPU_FAIL="out of memory")
    assert last["verdict"] == "passed"  # the kernel's run goes on: its roofline would be provisional
    assert "ask_error" not in report
    failed = report["asked"][0]
    assert failed == {"path": "None", "measured": False, "key": None,
                      "note": "calibrating NVIDIA H200 (driver 570.124.06) failed: RuntimeError: out of memory"}
    assert len(log) == 2  # not kept, so the second ask measured again
    assert not list((tmp_path / "user" / "calibration").glob("*.json"))
