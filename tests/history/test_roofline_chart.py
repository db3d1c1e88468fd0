"""Each benchmark shape of a kernel's versions on the GPU's roofline, from figures an NVIDIA H200
recorded (tests/fixtures/gpu/roofline: how they were made is in its make_history.py), and the
GPU's roofs: calibrated where ``ktui calibrate`` measured it, else the datasheet's, provisional."""

from __future__ import annotations

import json

import pytest
from h200_history import RECORDED, replay_h200_history

from ktui.history import roofline_chart
from ktui.history.store import Store
from ktui.protocol.statedir import calibration_file
from ktui.workspace.kernels import state_dir

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    ws, _ = replay_h200_history(tmp_path_factory.mktemp("h200") / "ws")
    return ws


def chart_points(ws, kernel: str) -> list[roofline_chart.Point]:
    store = Store.of(state_dir(ws))
    try:
        return roofline_chart.points(store, kernel)
    finally:
        store.close()


def test_every_timed_shape_of_every_version_is_a_point_at_its_intensity(h200):
    found = chart_points(h200, "rmsnorm_triton")
    assert [(p.version, p.shape) for p in found][:4] == [
        (1, "rows=4096,cols=1024"), (1, "rows=16384,cols=4096"), (1, "rows=32768,cols=4096,dtype=bfloat16"),
        (1, "rows=16384,cols=8192,dtype=bfloat16")]
    assert {p.version for p in found} == {1, 2, 3} and len(found) == 12
    fp32 = next(p for p in found if p.shape == "rows=4096,cols=1024")
    # 4 FLOPs per element over (2 rows·cols + cols) · 4 bytes: the reference's model
    assert fp32.intensity == pytest.approx(4 * 4096 * 1024 / ((2 * 4096 * 1024 + 1024) * 4), rel=1e-6)
    assert fp32.tflops == pytest.approx(4 * 4096 * 1024 / 13.76e-6 / 1e12, rel=1e-3)  # v1: 2439 GB/s


def test_a_point_s_attainable_rate_and_the_stop_threshold_are_the_benchmark_s(h200):
    add = {p.shape: p for p in chart_points(h200, "add_triton")}
    small = add["size=65536"]
    assert small.bound == "launch-bound" and small.fraction == pytest.approx(3.64 / 3.84, rel=0.01)  # as printed
    assert small.attainable_tflops == pytest.approx(small.tflops / small.fraction)
    assert small.reached is True
    v1 = {p.shape: p for p in chart_points(h200, "rmsnorm_triton") if p.version == 1}
    assert v1["rows=4096,cols=1024"].reached is False  # 82% of its attainable time: short of 90%


def test_the_calibrated_roofs_name_their_calibration_and_each_shape_s_memory_mix(h200):
    roofs, why = roofline_chart.roofs_for(h200, "NVIDIA H200")
    assert why == "" and roofs.provisional is False
    assert (roofs.source, roofs.driver) == ("calibrated 2026-12-02", "580.159.04")
    assert roofs.memory(0.5) == ("1:1 copy", 4251.0)
    assert roofs.memory(2 / 3) == ("2-read-1-write add", 4366.0)
    assert roofs.ceiling.tflops["bf16"] == 769.1 and roofs.ceiling.launch.seconds == pytest.approx(3.46e-6)


def test_an_uncalibrated_gpu_gets_its_datasheet_roofs_marked_provisional(tmp_path, h200):
    roofs, _ = roofline_chart.roofs_for(tmp_path, "NVIDIA H200")
    assert roofs.provisional is True and roofs.source == "datasheet NVIDIA H200 SXM 141GB"
    assert roofs.ceiling.launch is None and roofs.memory(0.5) == ("memory", 4800.0)
    assert roofline_chart.roofs_for(tmp_path, "Some Unknown Accelerator")[0] is None


def test_history_json_carries_each_run_s_points_and_roofs(h200, warm_ktui):
    proc = warm_ktui("history", "--json", "kernels/gemm_bf16_triton.py", cwd=h200)
    assert proc.returncode == 0, proc.stderr
    runs = [json.loads(line) for line in proc.stdout.splitlines()]
    newest = runs[0]
    assert newest["version"] == 3
    assert [p["shape"] for p in newest["roofline"]["points"]] == ["m=4096,n=4096,k=4096", "m=8192,n=8192,k=8192"]
    assert newest["roofline"]["roofs"]["source"] == "calibrated 2026-12-02"
    assert newest["roofline"]["roofs"]["compute_tflops"]["bf16"] == 769.1
    assert newest["roofline"]["points"] == [
        {**json.loads(json.dumps(p.__dict__))} for p in chart_points(h200, "gemm_bf16_triton") if p.version == 3]


def test_a_broken_calibration_file_is_said_and_the_datasheet_drawn(tmp_path):
    calibration_file(tmp_path).parent.mkdir(parents=True)
    calibration_file(tmp_path).write_text("{not json")
    roofs, why = roofline_chart.roofs_for(tmp_path, "NVIDIA H200")
    assert roofs.provisional and "cannot be read" in why


def test_the_gpu_s_newest_calibration_is_drawn_whatever_its_driver(tmp_path):
    entry = next(iter(json.loads((RECORDED / "calibration.json").read_text()).values()))
    older = {**entry, "driver": "570.1", "date": "2026-11-30T06:46:19+00:00", "bandwidth_gbs": 4241.0}
    calibration_file(tmp_path).parent.mkdir(parents=True)
    calibration_file(tmp_path).write_text(json.dumps({"NVIDIA H200 | driver 570.1": older,
                                                      "NVIDIA H200 | driver 580.159.04": entry}))
    roofs, _ = roofline_chart.roofs_for(tmp_path, "NVIDIA H200")
    assert (roofs.source, roofs.driver) == ("calibrated 2026-12-02", "580.159.04")


def test_the_users_calibration_is_drawn_where_the_workspace_has_none(tmp_path, monkeypatch):
    from ktui.measure.calibrate import Calibration, save_user

    monkeypatch.setenv("KTUI_USER_DIR", str(tmp_path / "user"))
    entry = next(iter(json.loads((RECORDED / "calibration.json").read_text()).values()))
    save_user(Calibration(**entry))
    roofs, why = roofline_chart.roofs_for(tmp_path / "ws", "NVIDIA H200")
    assert (roofs.provisional, roofs.source, why) == (False, "calibrated 2026-12-02", "")
