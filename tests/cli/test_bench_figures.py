"""What the benchmark rung reports, from synthetic samples: figures, message, summary, lines, settings."""

import random
import types

import pytest

from ktui.cli.main import build_parser
from ktui.cli.options import bench_settings
from ktui.measure.roofline import Ceiling, evaluate
from ktui.protocol.events import RungFinished
from ktui.protocol.job import BenchSettings, Job, Options
from ktui.protocol.lines import rung_line, summary_line
from ktui.worker.errors import RungFailure
from ktui.worker.ladder import summarize
from ktui.worker.rungs.bench import message, roofline_done, timing_figures
from ktui.worker.timing.clocks import ClockLog, ClockReading, parse_smi_line, reason_names
from ktui.worker.timing.sampler import CallTiming, Measurement


def measurement(kernel_us=50.0, ref_us=100.0, n=200, exposed=0, clocks=None) -> Measurement:
    rng = random.Random(0)
    kernel = CallTiming([rng.gauss(kernel_us, 0.5) / 1e3 for _ in range(n)], [0.01] * n, exposed=exposed)
    ref = CallTiming([rng.gauss(ref_us, 1.0) / 1e3 for _ in range(n)], [0.03] * n)
    log = clocks or ClockLog("nvml", [ClockReading(1980, 3201, 0), ClockReading(1965, 3201, 0x4)], 1980)
    return Measurement([kernel, ref], "noise", 0.4, 0.2, 12, "read 100 MiB (2 × the 50 MiB L2 (device))",
                       "torch.cuda._sleep", log)


@pytest.mark.unit
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


@pytest.mark.unit
def test_clock_figures_say_what_was_seen_and_flag_a_power_cap():
    f = timing_figures(measurement(), BenchSettings())
    assert f["clock_source"] == "nvml" and f["sm_mhz"] == [1965, 1980] and f["mem_mhz"] == [3201, 3201]
    assert f["throttled"] is True and f["throttle_reasons"] == ["sw_power_cap"]
    idle = timing_figures(measurement(clocks=ClockLog("nvml", [ClockReading(1980, 3201, 0x1)])), BenchSettings())
    assert idle["throttled"] is False  # idle is a state, not a throttle


@pytest.mark.unit
def test_no_clock_source_is_stated_not_hidden():
    f = timing_figures(measurement(clocks=ClockLog("unavailable: pynvml (nvidia-ml-py) is not installed; nvidia-smi not found")),
                       BenchSettings())
    assert f["clock_source"].startswith("unavailable: pynvml") and "sm_mhz" not in f


@pytest.mark.unit
def test_clock_helpers_decode_the_driver_bits_and_nvidia_smi_lines():
    assert reason_names(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert reason_names(0x1000) == ["unknown_0x1000"]
    assert parse_smi_line("1980, 3201, 0x0000000000000004") == (1980, 3201, 4)
    with pytest.raises(ValueError, match="unexpected"):
        parse_smi_line("[N/A]")


@pytest.mark.unit
def test_the_message_reads_as_one_line_with_the_roofline_and_warnings():
    f = timing_figures(measurement(exposed=40), BenchSettings())
    sheet = Ceiling("T", 1000.0, {}, {"bandwidth": "datasheet T"})
    roof = evaluate(f["kernel_us"] * 1e-6, 40e6, None, None, sheet, sheet)
    text = message(f, roof)
    assert text.startswith(f"{f['kernel_us']:.2f} µs ±") and "stopped on noise" in text
    assert ("of attainable (memory-bound, 1000 GB/s (datasheet T)) · roofline provisional, no launch floor calibrated: "
            "run ktui calibrate") in text
    assert "throttled (sw_power_cap)" in text and "launch not hidden in 20% of samples" in text
    fast = evaluate(f["kernel_us"] * 1e-6, 80e6, None, None, sheet, sheet)
    assert message(f, fast).startswith("impossible: ")


def bench(name, fraction, bound="memory-bound", speedup=2.0, ci=(1.9, 2.1), impossible=False, status="ok", us=10.0):
    return RungFinished("r", rung=name, status=status, figures={
        "speedup": speedup, "speedup_ci": list(ci), "roofline": fraction, "bound": bound, "kernel_us": us,
        "impossible": impossible, "ceiling": "4364 GB/s (calibrated 2026-12-02, 2-read-1-write add for 67% reads)",
        "at_roofline": fraction >= 0.9})


# add_triton on an H200 (issue 29, 2026-12-02): 3.81, 14.3 and 183.8 µs; the fractions are those of a
# 3.5 µs launch floor under the max model (tests/measure/test_launch_floor.py): 92%, 81%, 100%.
ADD_H200 = [bench("benchmark[size=65536]", 0.919, "launch-bound", 5.45, (5.3, 5.6), us=3.81),
            bench("benchmark[size=4194304]", 0.806, "memory-bound", 5.9, (5.8, 6.0), us=14.3),
            bench("benchmark[size=67108864]", 1.004, "memory-bound", 6.29, (6.2, 6.4), us=183.8)]


@pytest.mark.unit
def test_summary_takes_geometric_means_of_speedups_and_times():
    results = [bench("benchmark[a]", 0.95, speedup=2.0, ci=(1.9, 2.1), us=10),
               bench("benchmark[b]", 0.91, speedup=8.0, ci=(7.6, 8.4), us=1000)]
    s = summarize(results)
    assert s["speedup"] == pytest.approx(4.0) and s["speedup_ci"][0] < 4.0 < s["speedup_ci"][1]
    assert s["kernel_us"] == pytest.approx(100.0) and s["roofline_done"] == 0.9
    assert s["ceiling"] == ["4364 GB/s (calibrated 2026-12-02, 2-read-1-write add for 67% reads)"]
    bad = summarize(results + [bench("benchmark[c]", 1.4, speedup=50.0, ci=(40, 60), impossible=True,
                                     status="suspicious")])
    assert bad["impossible"] == ["benchmark[c]"] and bad["speedup"] == pytest.approx(4.0)  # not averaged in


@pytest.mark.unit
def test_summary_keeps_each_shape_s_fraction_and_bound_never_a_mean():
    s = summarize(ADD_H200)
    assert "roofline" not in s and "at_roofline" not in s  # the geometric mean (87%) mixed bounds
    assert s["roofline_shapes"] == {"size=65536": {"roofline": 0.919, "bound": "launch-bound"},
                                    "size=4194304": {"roofline": 0.806, "bound": "memory-bound"},
                                    "size=67108864": {"roofline": 1.004, "bound": "memory-bound"}}
    assert s["roofline_worst"] == {"shape": "size=4194304", "roofline": 0.806, "bound": "memory-bound"}


@pytest.mark.unit
def test_satisfied_when_every_shape_reaches_the_threshold_and_the_short_ones_are_named():
    s = summarize(ADD_H200)
    assert s["satisfied"] is False and s["short"] == ["size=4194304"]
    lenient = summarize(ADD_H200, roofline_done=0.8, done_source="the reference's ROOFLINE_DONE")
    assert lenient["satisfied"] is True and lenient["short"] == []
    assert lenient["roofline_done"] == 0.8 and lenient["roofline_done_source"] == "the reference's ROOFLINE_DONE"


@pytest.mark.unit
def test_an_impossible_or_unmeasured_shape_is_never_satisfied():
    impossible = bench("benchmark[size=8]", 1.4, impossible=True, status="suspicious")
    s = summarize([*ADD_H200, impossible], roofline_done=0.8)
    assert s["satisfied"] is False and s["short"] == ["size=8"]
    failed = RungFinished("r", rung="benchmark[size=9]", status="failed", message="crashed")
    s = summarize([*ADD_H200, failed], roofline_done=0.8)
    assert s["satisfied"] is False and s["short"] == ["size=9"]
    assert "satisfied" not in summarize([failed])  # no shape has a figure: nothing to decide on


@pytest.mark.unit
def test_a_shape_listed_twice_keeps_its_own_figure():
    s = summarize([bench("benchmark[size=8]", 0.95), bench("benchmark[size=8]#2", 0.5)])
    assert s["roofline_shapes"]["size=8#2"]["roofline"] == 0.5 and s["short"] == ["size=8#2"]


@pytest.mark.unit
def test_the_benchmark_line_and_summary_line_show_speedup_roofline_and_labels():
    line = rung_line({"rung": "benchmark[size=65536]", "status": "ok", "figures": {
        "kernel_us": 3.81, "ref_us": 20.8, "speedup": 5.45, "speedup_ci": [5.3, 5.6], "gbps": 206.5, "roofline": 0.919,
        "bound": "launch-bound", "at_roofline": True, "impossible": False, "throttled": False, "stop": "noise",
        "label": "within noise", "vs_version": 3, "vs_ratio": 0.996}})
    assert line == ("[benchmark[size=65536]] ok kernel_us=3.81 ref_us=20.8 speedup=5.45x speedup_ci=[5.30,5.60] "
                    "gbps=206.5 roofline=92% bound=launch-bound at_roofline=yes stop=noise "
                    "label=within noise of v3 (1.00x)")
    text = summary_line("add_triton", 4, "passed", {
        **summarize(ADD_H200), "correct": [5, 5], "speedup": 1.5, "speedup_ci": [1.4, 1.6],
        "vs_previous": {"version": 3, "ratio": 1.12, "label": "faster"},
        "vs_best": {"version": 2, "ratio": 1.05, "label": "faster"}}, "gpu", "sm_90a", 3.2)
    assert text == ("add_triton v4 passed · 5/5 correct · 1.50x [1.40, 1.60] vs reference · worst 81% of attainable "
                    "at size=4194304 (memory-bound) · not satisfied: size=4194304 short of 90% · faster than v3 (1.12x) · "
                    "new best (1.05x over v2) · gpu sm_90a · 3.2 s")
    satisfied = summary_line("add_triton", 4, "passed", summarize(ADD_H200, roofline_done=0.8), "gpu", "sm_90a", 3.2)
    assert "worst 81% of attainable at size=4194304 (memory-bound) · satisfied: every shape ≥ 80%" in satisfied
    impossible = summary_line("add_triton", 5, "suspicious", {"impossible": ["benchmark[size=65536]"]}, "gpu", "sm_90a", 1.0)
    assert "IMPOSSIBLE: faster than the hardware allows on benchmark[size=65536]" in impossible


@pytest.mark.unit
def test_a_run_recorded_before_per_shape_figures_shows_no_mean():
    old = summary_line("add_triton", 1, "passed", {"speedup": 5.45, "roofline": 0.31, "at_roofline": False},
                       "gpu", "sm_90a", 3.2)
    assert "roofline" not in old and "attainable" not in old and "31%" not in old


@pytest.mark.unit
def test_the_threshold_is_the_flag_else_the_reference_s_setting_else_ninety_percent():
    def ctx(bench=None, **reference):
        module = types.ModuleType("reference")
        module.__dict__.update(reference)
        job = Job("r", "k", "/k.py", "/r.py", "", "", "/", 1, "h", "", "/d", Options(bench=bench or {}))
        return types.SimpleNamespace(job=job, reference=module)

    assert roofline_done(ctx()) == (0.9, "default")
    assert roofline_done(ctx(ROOFLINE_DONE=0.85)) == (0.85, "the reference's ROOFLINE_DONE")
    assert roofline_done(ctx({"roofline_done": 0.95}, ROOFLINE_DONE=0.85)) == (0.95, "--roofline-done")
    with pytest.raises(RungFailure, match=r"ROOFLINE_DONE must be a fraction .* e\.g\. 0\.85, got 'high'"):
        roofline_done(ctx(ROOFLINE_DONE="high"))


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.worker
def test_a_bad_bench_flag_stops_ktui_run_before_any_worker(tmp_path):
    from conftest import ktui, make_workspace

    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--rse-target", "2", "kernels/add_triton.py", cwd=root)
    assert proc.returncode == 2 and "RSE target must be in (0, 1)" in proc.stderr
    assert not (root / ".ktui" / "history.db").exists()
