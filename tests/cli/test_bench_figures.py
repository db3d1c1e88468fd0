"""What the benchmark rung reports, from synthetic samples: figures, message, summary, lines, settings."""

import random

import pytest

from ktui.cli.main import build_parser
from ktui.cli.options import bench_settings
from ktui.loop.ladder import summarize
from ktui.loop.rungs.bench import message, timing_figures
from ktui.measure.clocks import ClockLog, ClockReading, parse_smi_line, reason_names
from ktui.measure.roofline import Ceiling, evaluate
from ktui.measure.timing import CallTiming, Measurement
from ktui.protocol.events import RungFinished
from ktui.protocol.job import BenchSettings, Job, Options
from ktui.run.render import rung_line, summary_line


def measurement(kernel_us=50.0, ref_us=100.0, n=200, exposed=0, clocks=None) -> Measurement:
    rng = random.Random(0)
    kernel = CallTiming([rng.gauss(kernel_us, 0.5) / 1e3 for _ in range(n)], [0.01] * n, exposed=exposed)
    ref = CallTiming([rng.gauss(ref_us, 1.0) / 1e3 for _ in range(n)], [0.03] * n)
    log = clocks or ClockLog("nvml", [ClockReading(1980, 3201, 0), ClockReading(1965, 3201, 0x4)], 1980)
    return Measurement([kernel, ref], "noise", 0.4, 0.2, 12, "read 100 MiB (2 × the 50 MiB L2 (device))",
                       "torch.cuda._sleep", log)


def test_timing_figures_hold_every_statistic_of_kernel_and_reference():
    f = timing_figures(measurement(), BenchSettings())
    for prefix in ("kernel", "ref"):
        for key in ("us", "mean_us", "min_us", "iqr_us", "rse", "host_us", "exposed"):
            assert f"{prefix}_{key}" in f, (prefix, key)
    assert f["kernel_us"] == pytest.approx(50, rel=0.01) and f["ref_us"] == pytest.approx(100, rel=0.01)
    assert f["kernel_host_us"] == pytest.approx(10.0)
    assert f["speedup"] == pytest.approx(2.0, rel=0.02)
    lo, hi = f["speedup_ci"]
    assert lo < f["speedup"] < hi and hi - lo < 0.05
    assert f["n"] == 200 and f["stop"] == "noise" and f["cache"] == "cold"
    assert f["flush"].startswith("read 100 MiB")


def test_clock_figures_say_what_was_seen_and_flag_a_power_cap():
    f = timing_figures(measurement(), BenchSettings())
    assert f["clock_source"] == "nvml" and f["sm_mhz"] == [1965, 1980] and f["mem_mhz"] == [3201, 3201]
    assert f["throttled"] is True and f["throttle_reasons"] == ["sw_power_cap"]
    idle = timing_figures(measurement(clocks=ClockLog("nvml", [ClockReading(1980, 3201, 0x1)])), BenchSettings())
    assert idle["throttled"] is False  # idle is a state, not a throttle


def test_no_clock_source_is_stated_not_hidden():
    f = timing_figures(measurement(clocks=ClockLog("unavailable: pynvml (nvidia-ml-py) is not installed; nvidia-smi not found")),
                       BenchSettings())
    assert f["clock_source"].startswith("unavailable: pynvml") and "sm_mhz" not in f


def test_clock_helpers_decode_the_driver_bits_and_nvidia_smi_lines():
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(0x1000) == ["unknown_0x1000"]
    assert parse_smi_line("1980, 3201, 0x0000000000000004") == (1980, 3201, 4)
    with pytest.raises(ValueError, match="unexpected"):
        parse_smi_line("[N/A]")


def test_the_message_reads_as_one_line_with_the_roofline_and_warnings():
    f = timing_figures(measurement(exposed=40), BenchSettings())
    sheet = Ceiling("T", 1000.0, {}, {"bandwidth": "datasheet T"})
    roof = evaluate(f["kernel_us"] * 1e-6, 40e6, None, None, sheet, sheet)
    text = message(f, roof)
    assert text.startswith(f"{f['kernel_us']:.2f} µs ±") and "stopped on noise" in text
    assert "of roofline (memory, 1000 GB/s (datasheet T))" in text
    assert "throttled (sw_power_cap)" in text and "launch not hidden in 20% of samples" in text
    fast = evaluate(f["kernel_us"] * 1e-6, 80e6, None, None, sheet, sheet)
    assert message(f, fast).startswith("impossible: ")


def test_summary_takes_geometric_means_and_flags_the_roofline():
    def rung(name, speedup, ci, fraction, impossible=False, status="ok", us=10.0):
        return RungFinished("r", rung=name, status=status, figures={
            "speedup": speedup, "speedup_ci": ci, "roofline": fraction, "kernel_us": us, "impossible": impossible,
            "ceiling": "4800 GB/s (datasheet NVIDIA H200 SXM 141GB)", "at_roofline": fraction >= 0.9})

    results = [rung("benchmark[a]", 2.0, [1.9, 2.1], 0.95, us=10), rung("benchmark[b]", 8.0, [7.6, 8.4], 0.91, us=1000)]
    s = summarize(results)
    assert s["speedup"] == pytest.approx(4.0) and s["speedup_ci"][0] < 4.0 < s["speedup_ci"][1]
    assert s["roofline"] == pytest.approx((0.95 * 0.91) ** 0.5) and s["at_roofline"] is True
    assert s["kernel_us"] == pytest.approx(100.0) and s["roofline_done"] == 0.9
    assert s["ceiling"] == ["4800 GB/s (datasheet NVIDIA H200 SXM 141GB)"]
    assert summarize(results, roofline_done=0.95)["at_roofline"] is False
    bad = summarize(results + [rung("benchmark[c]", 50.0, [40, 60], 1.4, impossible=True, status="suspicious")])
    assert bad["impossible"] == ["benchmark[c]"] and bad["at_roofline"] is False
    assert bad["speedup"] == pytest.approx(4.0)  # an impossible shape is not averaged in


def test_the_benchmark_line_and_summary_line_show_speedup_roofline_and_labels():
    line = rung_line({"rung": "benchmark[size=65536]", "status": "ok", "figures": {
        "kernel_us": 5.123, "ref_us": 7.9, "speedup": 1.54, "speedup_ci": [1.52, 1.57], "gbps": 153.5, "roofline": 0.032,
        "at_roofline": False, "impossible": False, "throttled": False, "stop": "noise", "label": "within noise",
        "vs_version": 3, "vs_ratio": 0.996}})
    assert line == ("[benchmark[size=65536]] ok kernel_us=5.12 ref_us=7.90 speedup=1.54x speedup_ci=[1.52,1.57] "
                    "gbps=153.5 roofline=3% stop=noise label=within noise of v3 (1.00x)")
    text = summary_line("add_triton", 4, "passed", {
        "correct": [5, 5], "speedup": 1.5, "speedup_ci": [1.4, 1.6], "roofline": 0.93, "at_roofline": True,
        "vs_previous": {"version": 3, "ratio": 1.12, "label": "faster"},
        "vs_best": {"version": 2, "ratio": 1.05, "label": "faster"}}, "gpu", "sm_90a", 3.2)
    assert text == ("add_triton v4 passed · 5/5 correct · 1.50x [1.40, 1.60] vs reference · 93% of roofline · "
                    "at roofline · faster than v3 (1.12x) · new best (1.05x over v2) · gpu sm_90a · 3.2 s")
    impossible = summary_line("add_triton", 5, "suspicious", {"impossible": ["benchmark[size=65536]"]}, "gpu", "sm_90a", 1.0)
    assert "IMPOSSIBLE: faster than the hardware allows on benchmark[size=65536]" in impossible


def test_run_flags_become_bench_settings_that_reach_the_worker():
    args = build_parser().parse_args(["run", "k.py", "--hot-cache", "--cuda-graph", "--bench-time", "1.5",
                                      "--rse-target", "0.01", "--roofline-done", "0.8", "--flush", "write"])
    bench = bench_settings(args)
    assert bench == {"hot_cache": True, "cuda_graph": True, "time_s": 1.5, "rse_target": 0.01, "roofline_done": 0.8,
                     "flush": "write"}
    job = Job("r", "k", "/k.py", "/r.py", "", "", "/", 1, "h", "", "/d", Options(bench=bench))
    settings = Job.from_json(job.to_json()).options.bench_settings()
    assert settings.hot_cache and settings.time_s == 1.5 and settings.min_samples == 20
    assert bench_settings(build_parser().parse_args(["run", "k.py"])) == {}


@pytest.mark.parametrize("bench, words", [
    ({"rse_target": 5}, "RSE target must be in"),
    ({"time_s": 0}, "time cap must be positive"),
    ({"roofline_done": 0}, "roofline threshold"),
    ({"min_samples": 1}, "at least 3 samples"),
    ({"flush": "sideways"}, "'read' or 'write'"),
    ({"colour": "red"}, "unknown benchmark setting"),
])
def test_bad_bench_settings_are_named_in_the_error(bench, words):
    with pytest.raises(ValueError, match=words):
        BenchSettings.from_dict(bench)


def test_a_bad_bench_flag_stops_ktui_run_before_any_worker(tmp_path):
    from conftest import ktui, make_workspace

    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--rse-target", "2", "kernels/add_triton.py", cwd=root)
    assert proc.returncode == 2 and "RSE target must be in (0, 1)" in proc.stderr
    assert not (root / ".ktui" / "history.db").exists()
