"""The launch floor and the stop decision on a real GPU: ``ktui calibrate`` measures the floor and
fits its model; every shipped Triton kernel's shapes get a fraction of their attainable time, a
bound, and the kernel a stop decision.

Run on a CUDA machine with ``python3 -m pytest -m gpu tests/worker/test_launch_floor_gpu.py -s``
(about 2 minutes on an H200; ``-s`` prints the figures for the measured docs).
"""

import json

import pytest
import torch
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.measure import calibrate
from ktui.protocol.lines import summary_line

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timing,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.worker,
]

KERNELS = ["add_triton", "rmsnorm_triton", "softmax_triton", "gemm_bf16_triton"]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("ws"), kernels=KERNELS)
    cal = ktui("calibrate", "--json", "--time", "0.5", cwd=root)
    assert cal.returncode == 0, cal.stderr
    run = ktui("run", "--no-audit", "--json", "--bench-time", "1", *[f"kernels/{k}.py" for k in KERNELS], cwd=root)
    events = by_kernel(parse_events(run.stdout))
    print("\n" + "\n".join(calibrate.describe(calibrate.Calibration(**{k: v for k, v in json.loads(cal.stdout).items()
                                                                          if k not in ("path", "workspace_path", "note")}))))
    for name in KERNELS:
        for rung, r in rungs(events[name]).items():
            if rung.startswith("benchmark["):
                f = r["figures"]
                print(f"{name} {rung}: {f.get('kernel_us', 0):.2f} µs, {f.get('roofline', 0):.0%} of "
                      f"{f.get('attainable_us', 0):.2f} µs attainable, {f.get('bound')}, {f.get('ceiling')}")
        s = finished(events[name])
        print(summary_line(name, 1, s["verdict"], s["summary"], "gpu", "", 0.0))
    return root, json.loads(cal.stdout), run, events


def test_calibrate_measures_the_launch_floor_and_shows_the_fit(calibrated):
    _, cal, _, _ = calibrated
    floor = cal["launch_floor"]
    assert "error" not in floor, floor
    assert 0.5 < floor["floor_us"] < 30 and floor["floor_us"] == max(floor["empty_us"], floor["tiny_copy_us"])
    assert floor["model"] in ("max", "sum")
    assert floor["rms_log_error"][floor["model"]] == min(floor["rms_log_error"].values())
    assert len(floor["copies"]) == 6 and all({"max_residual", "sum_residual"} <= set(c) for c in floor["copies"])
    times = [c["measured_us"] for c in floor["copies"]]
    assert times[-1] > 20 * times[0]  # 2 GiB moved takes far longer than 8 KiB: the sizes really differ


def test_every_shape_names_its_bound_and_the_small_add_is_launch_bound(calibrated):
    _, _, run, events = calibrated
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    add = rungs(events["add_triton"])
    small, large = add["benchmark[size=65536]"]["figures"], add["benchmark[size=67108864]"]["figures"]
    assert small["bound"] == "launch-bound" and small["roofline"] > 0.3  # not "4% of roofline" any more
    assert large["bound"] == "memory-bound"
    for r in rungs(events["gemm_bf16_triton"]).values():
        if r["rung"].startswith("benchmark["):
            assert r["figures"]["bound"] == "compute-bound", r["figures"]
    for name in KERNELS:
        for r in rungs(events[name]).values():
            if r["rung"].startswith("benchmark["):
                f = r["figures"]
                assert f["bound"] in ("launch-bound", "memory-bound", "compute-bound") and f["launch_floor_us"] > 0
                assert f["roofline_model"].startswith(("max(", "launch floor +")), f["roofline_model"]


def test_each_kernel_gets_per_shape_figures_and_a_stop_decision_never_a_mean(calibrated):
    _, _, _, events = calibrated
    for name in KERNELS:
        s = finished(events[name])["summary"]
        benches = [r for r in rungs(events[name]) if r.startswith("benchmark[")]
        assert len(s["roofline_shapes"]) == len(benches) and "roofline" not in s
        worst = min(s["roofline_shapes"].values(), key=lambda v: v["roofline"])
        assert s["roofline_worst"]["roofline"] == worst["roofline"]
        assert isinstance(s["satisfied"], bool) and s["satisfied"] == (not s["short"])
        assert all(s["roofline_shapes"][shape]["roofline"] < s["roofline_done"] for shape in s["short"])
        line = summary_line(name, 1, "passed", s, "gpu", "sm_90a", 1.0)
        assert "of attainable at" in line and ("satisfied: every shape" in line or "short of" in line)
