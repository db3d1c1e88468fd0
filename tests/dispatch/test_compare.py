"""Labelling a new version against the history: previous and best, faster / slower / within noise.

The runs are written to a real SQLite history as the loop's events, then a new run's events go
through the comparer the session uses.
"""

import pytest

from ktui.dispatch.compare import VersionComparer, best_of, noise_floor
from ktui.history.store import Store
from ktui.protocol.events import RunFinished, RungFinished, RunStarted

pytestmark = pytest.mark.unit

SHAPES = ("benchmark[size=65536]", "benchmark[size=4194304]")


def start(run_id, version, device="NVIDIA H200", ref_hash="r1", tier="gpu"):
    return RunStarted(run_id, kernel="add_triton", path="/ws/kernels/add_triton.py", version=version, content_hash=f"h{version}",
                      reference="/ws/references/add.py", reference_hash=ref_hash, tier=tier, device=device, arch="sm_90a",
                      run_dir="/ws/.ktui/runs/add_triton/1")


def bench(run_id, rung, us, rse=0.003, cache="cold", status="ok"):
    return RungFinished(run_id, rung=rung, status=status, figures={"kernel_us": us, "kernel_rse": rse, "cache": cache})


def record(store, run_id, version, times, verdict="passed", **kw):
    store.version_for("add_triton", f"h{version}", "/ws/kernels/add_triton.py")
    store.record(start(run_id, version, **kw))
    for rung, us in zip(SHAPES, times):
        store.record(bench(run_id, rung, us))
    # the run's speedup over the reference (what "best" is judged by, ktui.history.best): here
    # the reference takes 1 ms in every run, so the fastest version has the highest speedup
    store.record(RunFinished(run_id, verdict=verdict, summary={"speedup": 1000.0 / sum(times)}))


def new_run(store, run_id, version, times, rse=0.003, cache="cold", **kw):
    """The new run's events through the comparer: (rung figures by rung, summary)."""
    compare = VersionComparer(store)
    compare(start(run_id, version, **kw))
    figures = {rung: compare(bench(run_id, rung, us, rse=rse, cache=cache)).figures for rung, us in zip(SHAPES, times)}
    return figures, compare(RunFinished(run_id, verdict="passed")).summary


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "history.db")
    record(s, "a", 1, [10.0, 100.0])
    record(s, "b", 2, [8.0, 80.0])   # the best so far
    record(s, "c", 3, [9.0, 90.0])   # the previous
    yield s
    s.close()


def test_a_clearly_faster_version_is_labelled_faster_than_the_previous(store):
    figures, summary = new_run(store, "d", 4, [7.5, 75.0])
    first = figures[SHAPES[0]]
    assert first["label"] == "faster" and first["vs_version"] == 3
    assert first["vs_ratio"] == pytest.approx(9.0 / 7.5)
    assert first["vs_ci"][0] < first["vs_ratio"] < first["vs_ci"][1]
    assert summary["label"] == "faster" and summary["vs_previous"]["version"] == 3
    assert summary["vs_previous"]["shapes"] == 2


def test_the_best_version_is_the_fastest_one_not_the_latest(store):
    figures, summary = new_run(store, "d", 4, [7.5, 75.0])
    assert figures[SHAPES[1]]["best_version"] == 2
    assert figures[SHAPES[1]]["best_ratio"] == pytest.approx(80 / 75)
    assert summary["vs_best"]["version"] == 2 and summary["vs_best"]["label"] == "faster"


def test_a_change_inside_the_run_to_run_floor_is_within_noise(store):
    figures, summary = new_run(store, "d", 4, [8.9, 89.5])  # 1% faster than v3 on a 9 µs kernel
    assert figures[SHAPES[0]]["label"] == "within noise"
    assert summary["label"] == "within noise"


def test_a_noisy_measurement_cannot_claim_a_change(store):
    figures, _ = new_run(store, "d", 4, [8.0, 80.0], rse=0.08)
    assert figures[SHAPES[0]]["label"] == "within noise"


def test_a_slower_version_is_labelled_slower_against_both(store):
    figures, summary = new_run(store, "d", 4, [11.0, 110.0])
    assert figures[SHAPES[0]]["label"] == "slower" and figures[SHAPES[0]]["best_label"] == "slower"
    assert summary["vs_previous"]["label"] == "slower" and summary["vs_best"]["label"] == "slower"


def test_rerunning_a_version_compares_with_the_other_versions_not_itself(store):
    _, summary = new_run(store, "d", 3, [9.0, 90.0])
    assert summary["vs_previous"]["version"] == 2


def test_runs_on_another_device_another_reference_or_cache_mode_are_not_compared(store):
    assert "vs_previous" not in new_run(store, "d", 4, [7.0, 70.0], device="NVIDIA H100 80GB HBM3")[1]
    assert "vs_previous" not in new_run(store, "e", 4, [7.0, 70.0], ref_hash="r2")[1]
    figures, summary = new_run(store, "f", 4, [7.0, 70.0], cache="hot")
    assert "label" not in figures[SHAPES[0]] and "vs_previous" not in summary


def test_a_run_on_another_gpu_model_is_compared_only_with_that_model_and_says_what_was_left_out(store):
    h100 = "NVIDIA H100 80GB HBM3"
    _, summary = new_run(store, "d", 4, [7.0, 70.0], device=h100)
    assert summary["compare_note"] == f"not compared: earlier versions ran on NVIDIA H200, this one on {h100}"
    record(store, "e", 5, [7.0, 70.0], device=h100)
    _, summary = new_run(store, "f", 6, [7.0, 70.0], device=h100)
    assert summary["vs_previous"]["version"] == 5 and summary["vs_best"]["version"] == 5  # H100 runs only
    assert summary["compare_note"] == f"compared only with runs on {h100}; runs on NVIDIA H200 were left out"
    _, summary = new_run(store, "g", 7, [7.0, 70.0])  # on the H200 again: the H100 runs are left out
    assert summary["vs_previous"]["version"] == 3 and "NVIDIA H100" in summary["compare_note"]


def test_a_run_on_the_same_gpu_model_as_every_earlier_one_has_no_note(store):
    assert "compare_note" not in new_run(store, "d", 4, [7.0, 70.0])[1]


def test_failed_runs_and_cpu_runs_are_no_baseline(tmp_path):
    s = Store(tmp_path / "history.db")
    record(s, "a", 1, [5.0, 50.0], verdict="failed")
    figures, summary = new_run(s, "b", 2, [9.0, 90.0])
    assert "label" not in figures[SHAPES[0]] and "vs_previous" not in summary
    cpu = VersionComparer(s)
    event = start("c", 3, tier="cpu")
    assert cpu(event) is event
    s.close()


def test_the_best_must_have_timed_every_shape():
    from ktui.history.store import Baseline

    partial = Baseline(5, "x", 0.0, {SHAPES[0]: {"kernel_us": 1.0}}, speedup=10.0)
    full = Baseline(4, "y", 0.0, {SHAPES[0]: {"kernel_us": 5.0}, SHAPES[1]: {"kernel_us": 50.0}}, speedup=2.0)
    assert best_of([partial, full]).version == 4


def test_short_kernels_get_a_wider_noise_floor():
    assert noise_floor(5.0) == 0.03 and noise_floor(50.0) == 0.01


def _sass(state, version, text):
    run_dir = state / "runs" / "add_triton" / str(version)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "add_kernel.sass").write_text(text)
    (run_dir / "resources.json").write_text('{"add_kernel": {"registers": 28, "file_stem": "add_kernel"}}')


SASS = """\t.section\t.text.add_kernel,"ax",@progbits
add_kernel:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0020*/                   FADD R0, R2, R3 ;
        /*0030*/                   STG.E desc[UR4][R4.64], R0 ;
        /*0040*/                   EXIT ;
"""


def test_a_tenfold_jump_with_identical_sass_is_suspicious(store, tmp_path):
    state = tmp_path / "state"
    _sass(state, 2, SASS)
    _sass(state, 4, SASS)
    compare = VersionComparer(store, state)
    compare(start("d", 4))
    for rung, us in zip(SHAPES, [0.5, 5.0]):  # 16x faster than the best (v2: 8, 80)
        compare(bench("d", rung, us))
    end = compare(RunFinished("d", verdict="passed"))
    assert end.verdict == "suspicious"
    assert "identical SASS" in end.message and "v2" in end.message


def test_a_tenfold_jump_with_new_machine_code_is_believed(store, tmp_path):
    state = tmp_path / "state"
    _sass(state, 2, SASS)
    _sass(state, 4, SASS.replace("LDG.E R2", "LDG.E.128 R2"))
    compare = VersionComparer(store, state)
    compare(start("d", 4))
    for rung, us in zip(SHAPES, [0.5, 5.0]):
        compare(bench("d", rung, us))
    assert compare(RunFinished("d", verdict="passed")).verdict == "passed"
