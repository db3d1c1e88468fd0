"""The benchmark rung on a real GPU: every figure, the timer's own guarantees, calibration, labels.

Run on a CUDA machine with ``python3 -m pytest -m gpu tests/worker/test_bench_gpu.py``.
"""

import json
import time

import pytest
import torch
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timing,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.worker,
]

KERNELS = ["add_triton", "softmax_triton", "add_cutedsl"]
TIMING_KEYS = [f"{p}_{k}" for p in ("kernel", "ref") for k in ("us", "mean_us", "min_us", "iqr_us", "rse", "host_us", "exposed")]


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("ws"), kernels=KERNELS)
    proc = ktui("run", "--no-audit", "--json", "--seed", "3", "--cuda-graph", "--bench-time", "1", *[f"kernels/{k}.py" for k in KERNELS],
                cwd=root)
    return root, proc, by_kernel(parse_events(proc.stdout))


def benches(events):
    return {name: r for name, r in rungs(events).items() if name.startswith("benchmark[")}


def test_every_shipped_kernel_is_timed_on_every_benchmark_shape(gpu_run):
    _, proc, kernels = gpu_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in KERNELS:
        timed = benches(kernels[name])
        assert len(timed) == 3 and all(r["status"] == "ok" for r in timed.values()), (name, timed)


def test_benchmark_rungs_report_median_mean_min_iqr_n_and_why_they_stopped(gpu_run):
    for name in KERNELS:
        for rung, r in benches(gpu_run[2][name]).items():
            f = r["figures"]
            for key in TIMING_KEYS:
                assert key in f, (name, rung, key)
            assert 0 < f["kernel_min_us"] <= f["kernel_us"] and f["kernel_iqr_us"] >= 0
            assert f["n"] >= 20 and f["stop"] in ("noise", "cap", "max_samples")
            if f["stop"] == "noise":
                assert f["kernel_rse"] <= 0.005 and f["ref_rse"] <= 0.005
            # three sets, or two where three would hold more than 3× a footprint past a gigabyte
            assert f["cache"] == "cold" and f["flush"].startswith("read") and f["input_sets"] in (2, 3)


def test_the_speedup_comes_with_an_interval_around_it(gpu_run):
    for name in KERNELS:
        for r in benches(gpu_run[2][name]).values():
            f = r["figures"]
            lo, hi = f["speedup_ci"]
            assert lo <= f["speedup"] <= hi
            assert f["speedup"] == pytest.approx(f["ref_us"] / f["kernel_us"], rel=1e-6)


def test_the_spin_pad_hides_python_launch_overhead(gpu_run):
    # CuTeDSL's launch path builds DLPack descriptors in Python (tens of µs); the pad must
    # keep the GPU busy through it, or the device time would include host time.
    for name in KERNELS:
        for rung, r in benches(gpu_run[2][name]).items():
            f = r["figures"]
            assert f["kernel_exposed"] <= 0.02, (name, rung, f["kernel_exposed"], f["kernel_host_us"])
            assert f["pad"] == "torch.cuda._sleep"


def test_roofline_figures_name_the_ceiling_they_used(gpu_run):
    for name in KERNELS:
        for r in benches(gpu_run[2][name]).values():
            f = r["figures"]
            assert f["gbps"] > 0 and f["tflops"] > 0
            assert 0 < f["roofline"] <= 1.0 and f["impossible"] is False
            # the session's first benchmark calibrated the GPU (or found the session's calibration): a launch floor
            assert f["bound"] in ("launch-bound", "memory-bound") and f["launch_floor_us"] > 0
            assert f["roofline_model"].startswith(("max(", "launch floor +")) and "roofline_provisional" not in f
            assert "calibrated" in f["ceiling"] and f["calibration"].endswith(".json")
            assert isinstance(f["at_roofline"], bool)


def test_clocks_seen_during_the_measurement_are_recorded(gpu_run):
    for r in benches(gpu_run[2]["add_triton"]).values():
        f = r["figures"]
        assert f["clock_source"] in ("nvml", "nvidia-smi"), f["clock_source"]
        assert f["sm_mhz"][0] > 0 and f["mem_mhz"][0] > 0 and isinstance(f["throttled"], bool)


def test_cuda_graph_timing_is_a_separate_figure(gpu_run):
    for name in ("add_triton", "softmax_triton"):
        for r in benches(gpu_run[2][name]).values():
            f = r["figures"]
            assert f["graph_us"] > 0 and f["graph_n"] >= 20, f.get("graph_error")
            assert f["graph_speedup_ci"][0] <= f["graph_speedup"] <= f["graph_speedup_ci"][1]
    for r in benches(gpu_run[2]["add_cutedsl"]).values():
        assert "graph_us" in r["figures"] or r["figures"]["graph_error"]


def test_the_summary_carries_speedup_each_shape_s_roofline_and_the_stop_decision(gpu_run):
    for name in KERNELS:
        s = finished(gpu_run[2][name])["summary"]
        assert s["speedup"] > 0 and s["speedup_ci"][0] <= s["speedup"] <= s["speedup_ci"][1]
        assert "roofline" not in s and len(s["roofline_shapes"]) == 3
        assert all(0 < v["roofline"] <= 1 for v in s["roofline_shapes"].values())
        assert isinstance(s["satisfied"], bool) and s["roofline_done"] == 0.9


def test_a_new_version_is_labelled_against_the_previous_one(gpu_run):
    root, _, _ = gpu_run
    path = root / "kernels" / "add_triton.py"
    path.write_text(path.read_text() + "\n# an edit that changes nothing on the GPU\n")
    proc = ktui("run", "--no-audit", "--json", "--seed", "4", "--bench-time", "1", "kernels/add_triton.py", cwd=root)
    events = parse_events(proc.stdout)
    for r in benches(events).values():
        assert r["figures"]["label"] in ("faster", "slower", "within noise")
        assert r["figures"]["vs_version"] == 1 and r["figures"]["best_version"] == 1
    s = finished(events)["summary"]
    assert s["vs_previous"]["version"] == 1 and s["label"] == s["vs_previous"]["label"]
    plain = ktui("history", "kernels/add_triton.py", cwd=root).stdout
    assert "v2 passed" in plain and " v1" in plain


def test_calibrate_measures_copy_bandwidth_and_bf16_and_the_benchmark_uses_them(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("calibrate", "--json", "--time", "0.5", cwd=root)
    assert proc.returncode == 0, proc.stderr
    cal = json.loads(proc.stdout)
    from ktui.measure.datasheets import lookup

    spec = lookup(cal["device"])
    assert cal["bandwidth_gbs"] > 0 and cal["tflops"]["bf16"] > 0
    if spec:
        assert 0.3 * spec.bandwidth_gbs < cal["bandwidth_gbs"] <= spec.bandwidth_gbs
        assert 0.2 * spec.tflops["bf16"] < cal["tflops"]["bf16"] <= spec.tflops["bf16"]
    assert (root / ".ktui" / "calibration.json").exists()
    run = ktui("run", "--no-audit", "--json", "--bench-time", "0.5", "kernels/add_triton.py", cwd=root)
    for r in benches(parse_events(run.stdout)).values():
        assert "calibrated" in r["figures"]["ceiling"]


# -- the timer itself, in this process ------------------------------------------------------------
def sampler(mode="read"):
    from ktui.worker.timing.sampler import Flush, Sampler

    return Sampler(Flush(mode))


def rule(time_s=1.0):
    from ktui.measure.stats import StoppingRule

    return StoppingRule(time_cap_s=time_s)


def test_a_working_set_that_fits_in_l2_is_faster_hot_than_cold():
    n = 1 << 21  # 3 × 8 MiB: inside any recent data-centre L2
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    call = lambda i: torch.add(x, y, out=out)  # noqa: E731
    cold = sampler("read").measure([call], rule(), 0.1).calls[0]
    hot = sampler("hot").measure([call], rule(), 0.1).calls[0]
    from statistics import median

    assert median(hot.samples_ms) < 0.9 * median(cold.samples_ms)


def test_host_time_before_a_launch_is_not_timed_as_device_time():
    x = torch.randn(1024, device="cuda")

    def slow_host(i):
        deadline = time.perf_counter() + 200e-6  # 200 µs of Python before a ~3 µs kernel
        while time.perf_counter() < deadline:
            pass
        x.add_(1)

    timing = sampler().measure([slow_host], rule(), 0.1).calls[0]
    from statistics import median

    assert median(timing.host_ms) > 0.19
    assert median(timing.samples_ms) < 0.05 and timing.exposed_fraction <= 0.02


def test_a_call_that_synchronises_is_flagged_rather_than_padded_forever():
    x = torch.randn(1024, device="cuda")

    def syncing(i):
        x.add_(1)
        torch.cuda.synchronize()

    timing = sampler().measure([syncing], rule(0.5), 0.1).calls[0]
    assert timing.synchronizes and timing.exposed_fraction > 0.9
