"""Calibration on first contact: the first benchmark on a GPU kind with no calibration measures it
once and keeps it for every workspace of the user; a workspace's own file wins; the key separates
device, driver and MIG profile; two processes at once measure once; without a launch floor no stop
decision, said in every surface. ``ktui calibrate`` measuring again: ``tests/cli/test_calibrate.py``.

The GPU is faked at the calibration's seam (``KTUI_CALIBRATION_MEASURE``, a file defining
``identity()`` and ``measure()``: ``tests/fixtures/calibration/fake_gpu.py``), so everything past
the measurement — the lookup, the lock, the files, the CLI — is ktui's own code. A benchmark asks its
worker's parent for a calibration, which the measuring process measures and keeps; here the
measuring process's own work (``measure_first``) answers in this process (``here``). The process
boundary — a confined worker asking, the measuring process beside it, the worker unable to write
what it keeps: ``tests/worker/test_confine_calibration.py``. The same path on a real GPU, from
``ktui run``: ``tests/worker/test_first_contact_gpu.py``.
"""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, child_env, make_workspace

from ktui.measure import calibrate
from ktui.measure.calibrate import Calibration, DeviceIdentity, Obtained
from ktui.protocol.events import RungFinished
from ktui.protocol.lines import summary_line
from ktui.worker.ladder import summarize
from ktui.worker.rungs.bench import ceilings
from ktui.worker.timing.calibrate import MEASURE_ENV, TIME_S, for_benchmark, measure_first

FAKE_GPU = FIXTURES / "calibration" / "fake_gpu.py"
H200 = DeviceIdentity("NVIDIA H200", "570.124.06")
H200_MEASURED = Calibration("NVIDIA H200", "570.124.06", "nvml", "2026-12-04T10:00:00+00:00", "2.11.0", 4393.0)


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """A fresh per-user folder and the fake GPU; the log of its measurements."""
    monkeypatch.setenv("KTUI_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv(MEASURE_ENV, str(FAKE_GPU))
    log = tmp_path / "measured.log"
    monkeypatch.setenv("FAKE_GPU_LOG", str(log))
    return log


def measured(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def here(progress) -> Obtained:
    """What the worker's parent has the measuring process do for a benchmark, done in this process."""
    return measure_first(TIME_S, progress)


class HereParent:
    """The worker's parent as the benchmark rung asks it (``ktui.worker.parent.Parent``), answering ``here``."""

    def calibration(self, progress) -> Obtained:
        return here(progress)


@pytest.mark.unit
def test_the_first_benchmark_measures_once_and_every_workspace_of_the_user_reuses_it(fake_gpu, tmp_path):
    told = []
    first = for_benchmark(make_workspace(tmp_path / "one"), told.append, here)
    assert len(measured(fake_gpu)) == 1 and first.measured_s is not None
    assert first.path == tmp_path / "user" / "calibration" / "NVIDIA_H200_driver_570.124.06.json" and first.shared
    assert first.path.is_file() and not (tmp_path / "one" / ".ktui" / "calibration.json").exists()
    assert told[0].startswith(f"measuring NVIDIA H200 (driver 570.124.06) once, kept in {first.path}")
    assert "launch floor: an empty kernel" in told
    second = for_benchmark(make_workspace(tmp_path / "two"), told.append, here)
    assert len(measured(fake_gpu)) == 1 and second.measured_s is None and second.path == first.path
    assert second.calibration == first.calibration and second.calibration.ceiling().launch is not None
    assert second.figures() == {"calibration": str(first.path)}
    assert set(first.figures()) == {"calibration", "calibration_s"}


@pytest.mark.unit
def test_a_workspace_s_own_calibration_wins_over_the_user_s(fake_gpu, tmp_path):
    for_benchmark(make_workspace(tmp_path / "one"), lambda _: None, here)
    pinned = make_workspace(tmp_path / "pinned")
    own = Calibration(**{**json.loads((tmp_path / "user" / "calibration" / "NVIDIA_H200_driver_570.124.06.json")
                                      .read_text()), "bandwidth_gbs": 4000.0})
    calibrate.save(pinned, own)
    got = for_benchmark(pinned, lambda _: None, here)
    assert got.calibration.bandwidth_gbs == 4000.0 and not got.shared
    assert got.path == pinned / ".ktui" / "calibration.json" and len(measured(fake_gpu)) == 1


@pytest.mark.unit
def test_the_key_separates_device_name_driver_and_mig_profile(fake_gpu, tmp_path, monkeypatch):
    root = make_workspace(tmp_path / "ws")
    paths = {for_benchmark(root, lambda _: None, here).path}
    monkeypatch.setenv("FAKE_GPU_DRIVER", "575.51.03")
    paths.add(for_benchmark(root, lambda _: None, here).path)
    monkeypatch.setenv("FAKE_GPU_MIG", "1g.18gb")
    mig = for_benchmark(root, lambda _: None, here)
    paths.add(mig.path)
    monkeypatch.setenv("FAKE_GPU_NAME", "NVIDIA H100 80GB HBM3")
    paths.add(for_benchmark(root, lambda _: None, here).path)
    assert len(measured(fake_gpu)) == 4 and len(paths) == 4
    assert mig.path.name == "NVIDIA_H200_driver_575.51.03_MIG_1g.18gb.json"
    assert mig.calibration.key == "NVIDIA H200 | driver 575.51.03 | MIG 1g.18gb"
    for name, driver, mig in (("NVIDIA H200", "570.124.06", ""), ("NVIDIA H200", "575.51.03", "1g.18gb")):
        monkeypatch.setenv("FAKE_GPU_NAME", name)
        monkeypatch.setenv("FAKE_GPU_DRIVER", driver)
        monkeypatch.setenv("FAKE_GPU_MIG", mig)
        assert for_benchmark(root, lambda _: None, here).measured_s is None  # each kind was kept
    assert len(measured(fake_gpu)) == 4


@pytest.mark.unit
def test_a_failed_measurement_is_told_and_not_kept_so_the_next_benchmark_tries_again(fake_gpu, tmp_path, monkeypatch):
    root = make_workspace(tmp_path / "ws")
    monkeypatch.setenv("FAKE_GPU_FAIL", "out of memory")
    failed = for_benchmark(root, lambda _: None, here)
    assert failed.calibration is None and failed.path is None
    assert failed.note == "calibrating NVIDIA H200 (driver 570.124.06) failed: RuntimeError: out of memory"
    assert failed.without_launch_floor() == (f"no launch floor: this GPU is not calibrated ({failed.note}); "
                                             "`ktui calibrate` measures it")
    assert not list((tmp_path / "user" / "calibration").glob("*.json"))
    monkeypatch.delenv("FAKE_GPU_FAIL")
    assert for_benchmark(root, lambda _: None, here).calibration is not None and len(measured(fake_gpu)) == 2


@pytest.mark.unit
def test_with_no_parent_to_ask_nothing_is_measured_and_the_roofline_says_why(fake_gpu, tmp_path):
    got = for_benchmark(make_workspace(tmp_path / "ws"), lambda _: None, None)
    assert got.calibration is None and got.note == "no process was there to measure it" and not measured(fake_gpu)
    assert got.without_launch_floor().startswith("no launch floor: this GPU is not calibrated (no process was there")


@pytest.mark.unit
def test_a_benchmark_uses_no_measurement_of_another_gpu_kind(fake_gpu, tmp_path):
    other = Calibration(**{**asdict(H200_MEASURED), "device": "NVIDIA H100 80GB HBM3"})
    got = for_benchmark(make_workspace(tmp_path / "ws"), lambda _: None, lambda _: Obtained(other, None, measured_s=1.0))
    assert got.calibration is None and got.path is None
    assert got.note == ("the measuring process calibrated 'NVIDIA H100 80GB HBM3 | driver 570.124.06', "
                        "not this GPU ('NVIDIA H200 | driver 570.124.06')")


@pytest.mark.unit
def test_a_measurement_not_kept_is_used_by_the_run_that_asked_and_says_so(fake_gpu, tmp_path):
    told = Obtained(H200_MEASURED, None, note="measured, not kept: no launch floor was measured", measured_s=2.5)
    got = for_benchmark(make_workspace(tmp_path / "ws"), lambda _: None, lambda _: told)
    assert got.calibration == H200_MEASURED and got.path is None and got.measured_s == 2.5
    assert got.note == "measured, not kept: no launch floor was measured"


@pytest.mark.unit
def test_what_was_obtained_reads_back_from_its_json_form(tmp_path):
    kept = Obtained(H200_MEASURED, tmp_path / "h200.json", note="a note", measured_s=14.5, waited_s=0.25)
    assert Obtained.from_json(json.loads(json.dumps(kept.to_json()))) == kept
    assert Obtained.from_json(Obtained(None, note="failed").to_json()) == Obtained(None, note="failed")
    broken = Obtained.from_json({"calibration": {"device": "NVIDIA H200"}, "path": "/x.json"})
    assert broken.calibration is None and broken.path is None and broken.note.startswith(
        "the measuring process returned a malformed calibration")


@pytest.mark.unit
def test_the_worker_asks_its_parent_tells_each_step_and_never_takes_a_stray_answer_for_a_job(tmp_path):
    import io

    from ktui.measure.calibrate import ANSWER, ASK, PROGRESS
    from ktui.worker.parent import Parent

    kept = Obtained(H200_MEASURED, tmp_path / "h200.json", measured_s=14.5)
    lines = [{"type": PROGRESS, "text": "bandwidth 1:1 copy"}, {"type": PROGRESS, "text": "matmul bf16: 8192³"},
             {"type": ANSWER, "obtained": kept.to_json()},
             {"type": ANSWER, "obtained": kept.to_json()},  # a kernel asked again and went on: never read as a job
             {"run_id": "r2"}]
    sent, told = [], []
    parent = Parent(sent.append, io.StringIO("".join(json.dumps(line) + "\n" for line in lines)))
    assert parent.calibration(told.append) == kept
    assert sent == [{"type": ASK}] and told == ["bandwidth 1:1 copy", "matmul bf16: 8192³"]
    assert [json.loads(job) for job in parent.jobs()] == [{"run_id": "r2"}]
    assert parent.calibration(told.append).note == "the worker's parent closed its input before it answered"


@pytest.mark.unit
def test_a_corrupt_user_file_is_measured_again_and_replaced(fake_gpu, tmp_path):
    root = make_workspace(tmp_path / "ws")
    path = for_benchmark(root, lambda _: None, here).path
    path.write_text("{not json")
    again = for_benchmark(root, lambda _: None, here)
    assert again.calibration is not None and again.measured_s is not None and len(measured(fake_gpu)) == 2
    assert "does not hold a calibration" in again.note
    assert Calibration(**json.loads(path.read_text())).key == H200.key


@pytest.mark.unit
def test_a_calibration_without_a_launch_floor_says_why_and_what_to_do(tmp_path):
    old = Calibration("NVIDIA H200", "570.124.06", "nvml", "2026-11-30T06:46:19+00:00", "2.11.0", 4241.5)
    kept = Obtained(old, tmp_path / "calibration.json", shared=False)
    assert kept.without_launch_floor() == (f"no launch floor: {tmp_path / 'calibration.json'} was saved before ktui "
                                           "measured one; `ktui calibrate` measures it again")
    broken = Obtained(Calibration(**{**old.__dict__, "launch_floor": {"error": "OutOfMemoryError: CUDA out of memory"}}))
    assert broken.without_launch_floor().startswith("no launch floor: its measurement failed (OutOfMemoryError")
    ceiling, _, note = ceilings("NVIDIA H200", Obtained(None, note="calibrating it failed"))
    assert ceiling.source_of("bandwidth").startswith("datasheet") and ceiling.launch is None
    assert note == "calibrating it failed"


def bench(name, fraction, provisional=""):
    figures = {"speedup": 2.0, "speedup_ci": [1.9, 2.1], "roofline": fraction, "bound": "memory-bound",
               "kernel_us": 10.0, "impossible": False, "ceiling": "4800 GB/s (datasheet NVIDIA H200 SXM 141GB)"}
    if provisional:
        figures["roofline_provisional"] = provisional
    return RungFinished("r", rung=name, status="ok", figures=figures)


WHY = ("no launch floor: this GPU is not calibrated (calibrating NVIDIA H200 (driver 570.124.06) failed: "
       "RuntimeError: out of memory); `ktui calibrate` measures it")


@pytest.mark.unit
def test_an_uncalibrated_summary_says_the_roofline_is_provisional_and_makes_no_stop_decision():
    s = summarize([bench("benchmark[size=65536]", 0.04, WHY), bench("benchmark[size=67108864]", 0.95, WHY)])
    assert s["roofline_provisional"] == WHY and "satisfied" not in s and "short" not in s
    assert s["roofline_worst"] == {"shape": "size=65536", "roofline": 0.04, "bound": "memory-bound"}
    line = summary_line("add_triton", 1, "passed", s, "gpu", "sm_90a", 3.0)
    assert f"worst 4% of attainable at size=65536 (memory-bound) · roofline provisional, no stop decision: {WHY}" in line
    assert "satisfied" not in line
    # even where every shape is past the threshold: a decision comes only with the launch floor
    assert "satisfied" not in summarize([bench("benchmark[size=67108864]", 0.95, WHY)])
    calibrated = summarize([bench("benchmark[size=67108864]", 0.95)])
    assert calibrated["satisfied"] is True and "roofline_provisional" not in calibrated


@pytest.mark.unit
def test_the_calibration_s_time_is_reported_apart_from_the_run_s():
    first = bench("benchmark[size=65536]", 0.95)
    first.figures["calibration_s"] = 14.5
    s = summarize([first, bench("benchmark[size=4194304]", 0.93)])
    assert s["calibration_s"] == 14.5
    assert "GPU calibrated first in 14.5 s, once for every workspace" in summary_line("k", 1, "passed", s, "gpu", "sm_90a", 20.0)
    assert "calibration_s" not in summarize([bench("benchmark[size=65536]", 0.95)])


# -- two processes at once -------------------------------------------------------------------------

# Two workers' first benchmarks on one GPU kind at once (two workspaces, two users' sessions, a test
# suite in two processes): each worker's parent starts the measuring process, unconfined, which
# takes the device key's lock.
def _measuring(env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ktui.worker.timing.calibrate", "--first"], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _said(proc: subprocess.Popen, starts: str) -> bool:
    """Read ``proc``'s lines until its progress says something that ``starts`` so; False at its end."""
    return any(json.loads(line).get("progress", "").startswith(starts) for line in proc.stdout)  # stops at the first


@pytest.mark.worker
def test_two_processes_calibrating_one_gpu_kind_at_once_measure_it_once(tmp_path):
    log, hold = tmp_path / "measured.log", tmp_path / "hold"
    env = child_env({"KTUI_USER_DIR": str(tmp_path / "user"), MEASURE_ENV: str(FAKE_GPU), "FAKE_GPU_LOG": str(log),
                     "FAKE_GPU_HOLD": str(hold)})
    first = _measuring(env)
    second = None
    try:
        # it says so holding the lock, which it keeps until the fake GPU lets go
        assert _said(first, "measuring NVIDIA H200"), f"the first never measured: {first.stderr.read()}"
        second = _measuring(env)
        # the second waits for the first's lock instead of measuring too
        assert _said(second, "waiting for another ktui process calibrating NVIDIA H200"), \
            f"the second never said it waits: {second.stderr.read()}"
        hold.touch()
        one = Obtained.from_json(json.loads(first.stdout.readlines()[-1])["obtained"])
        two = Obtained.from_json(json.loads(second.stdout.readlines()[-1])["obtained"])
        assert first.wait() == 0 and second.wait() == 0
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert len(measured(log)) == 1
    assert one.measured_s is not None and two.measured_s is None and two.waited_s > 0
    kept = tmp_path / "user" / "calibration" / "NVIDIA_H200_driver_570.124.06.json"
    assert one.path == two.path == kept and one.calibration == two.calibration
    assert one.calibration.key == H200.key and json.loads(one.path.read_text())["device"] == "NVIDIA H200"


# -- what the surfaces show while and after a GPU is calibrated -------------------------------------

NOTE = "calibrating the GPU: measuring NVIDIA H200 (driver 570.124.06) once, kept in /u/calibration/x.json for every workspace"


@pytest.mark.unit
def test_the_dashboard_shows_the_calibration_in_flight_and_a_provisional_roofline_as_a_lower_bound():
    from ktui.protocol.events import RunFinished, RungStarted, RunStarted
    from ktui.tui.panes.rungs import _rows
    from ktui.tui.state import DashboardState, KernelView

    state = DashboardState(Path("/ws"))
    state.kernels["add_triton"] = KernelView(id="add_triton", path="/ws/kernels/add_triton.py")
    state.apply(RunStarted("r1", kernel="add_triton", path="/ws/kernels/add_triton.py", version=1, content_hash="h",
                           reference="/ws/references/add.py", reference_hash="rh", tier="gpu", device="NVIDIA H200",
                           arch="sm_90a", run_dir="/ws/.ktui/runs/add_triton/1"))
    view = state.kernels["add_triton"]
    view.shapes = (5, 3)
    state.apply(RungStarted("r1", rung="benchmark[size=65536]", timeout_s=120.0))
    assert view.rung_progress() == "bench 1/3"
    state.apply(RungStarted("r1", rung="benchmark[size=65536]", timeout_s=300.0, note=NOTE))
    assert view.rung_progress() == "bench 1/3 · calibrating the GPU"
    assert _rows(view)[-1] == {"rung": "benchmark[size=65536]", "status": "running", "figures": {}, "message": NOTE,
                               "error": None}
    state.apply(RungStarted("r1", rung="benchmark[size=65536]", timeout_s=120.0))  # the calibration is over
    assert view.rung_progress() == "bench 1/3"
    summary = summarize([bench("benchmark[size=65536]", 0.04, WHY)])
    state.apply(RunFinished("r1", verdict="passed", summary=summary))
    assert view.satisfied is None and view.summary["roofline_provisional"] == WHY


@pytest.mark.unit
def test_ktui_run_prints_each_step_of_the_calibration_as_it_comes(capsys):
    from ktui.cli.printers import LinePrinter
    from ktui.protocol.events import RungStarted

    printer = LinePrinter()
    printer(RungStarted("r1", rung="benchmark[size=65536]", timeout_s=120.0))
    printer(RungStarted("r1", rung="benchmark[size=65536]", timeout_s=300.0, note=NOTE))
    assert capsys.readouterr().out == f"[benchmark[size=65536]] … {NOTE}\n"


@pytest.mark.unit
def test_the_benchmark_line_says_its_roofline_is_provisional_and_what_the_calibration_cost():
    from ktui.measure.roofline import Ceiling, evaluate
    from ktui.worker.rungs.bench import message

    figures = {"kernel_us": 3.8, "kernel_rse": 0.002, "n": 400, "stop": "noise", "ref_us": 20.8, "speedup": 5.45,
               "speedup_ci": [5.3, 5.6], "roofline_provisional": WHY, "calibration_s": 14.5}
    sheet = Ceiling("NVIDIA H200", 4800.0, {}, {"bandwidth": "datasheet NVIDIA H200"})
    text = message(figures, evaluate(3.8e-6, 786432, None, None, sheet, sheet))
    assert f"(memory-bound, 4800 GB/s (datasheet NVIDIA H200)) · roofline provisional, {WHY}" in text
    assert "the GPU calibrated first, in 14.5 s (once for every workspace, not timed)" in text


@pytest.mark.unit
def test_a_mig_slice_is_told_by_its_name_or_its_uuid_and_a_whole_gpu_has_no_profile():
    from types import SimpleNamespace

    from ktui.worker.timing.device_id import mig_of

    whole = SimpleNamespace(uuid="8f2e0c6a-1b2c-4d5e-8f90-123456789abc", multi_processor_count=132, total_memory=150 << 30)
    assert mig_of("NVIDIA H200", whole) == ("NVIDIA H200", "")
    assert mig_of("NVIDIA A100-SXM4-40GB MIG 1g.5gb", whole) == ("NVIDIA A100-SXM4-40GB", "1g.5gb")
    slice_ = SimpleNamespace(uuid="MIG-4a1b2c3d", multi_processor_count=16, total_memory=int(17.75 * 2**30))
    assert mig_of("NVIDIA H200", slice_) == ("NVIDIA H200", "16 SMs, 17.8 GiB")
    assert mig_of("NVIDIA H200", whole, "MIG-4a1b2c3d") == ("NVIDIA H200", "132 SMs, 150.0 GiB")


@pytest.mark.unit
def test_a_measurement_without_a_launch_floor_is_used_but_not_kept_unless_ktui_calibrate_asks(fake_gpu, tmp_path):
    broken = Calibration(**{**asdict(H200_MEASURED), "launch_floor": {"error": "OutOfMemoryError: no room"}})
    root = make_workspace(tmp_path / "ws")
    got = calibrate.obtain(root, H200, lambda _: broken, lambda _: None)
    assert got.calibration == broken and got.path is None and got.measured_s is not None
    assert got.note.startswith("measured, not kept: the launch floor's measurement failed (OutOfMemoryError: no room)")
    assert calibrate.find(root, H200).calibration is None
    again = calibrate.obtain(root, H200, lambda _: broken, lambda _: None, again=True)
    assert again.path == calibrate.user_path(H200.key) and calibrate.find(root, H200).calibration == broken
    assert again.without_launch_floor().startswith("no launch floor: its measurement failed (OutOfMemoryError")


@pytest.mark.unit
def test_the_benchmark_rung_tells_each_step_restarts_its_limit_after_and_charges_the_time_to_its_first_shape(
        fake_gpu, tmp_path):
    from ktui.protocol.job import Job
    from ktui.worker.context import RunContext
    from ktui.worker.rungs.bench import CALIBRATION_STEP_S, device_calibration
    from ktui.worker.tier import Tier

    root = make_workspace(tmp_path / "ws")
    events = []
    job = Job("r1", "add_triton", str(root / "kernels" / "add_triton.py"), "", "", "", str(root), 1, "h", "", "/d")
    ctx = RunContext(job=job, tier=Tier("gpu", "NVIDIA H200", "sm_90a", "cuda"), emit=events.append,
                     parent=HereParent())
    ctx.rung = "benchmark[size=65536]"
    first = device_calibration(ctx)
    assert first.measured_s is not None and len(measured(fake_gpu)) == 1
    notes = [e.note for e in events[:-1]]
    assert notes[0].startswith("calibrating the GPU: measuring NVIDIA H200 (driver 570.124.06) once, kept in")
    assert all(e.rung == "benchmark[size=65536]" and e.timeout_s == CALIBRATION_STEP_S for e in events[:-1])
    assert events[-1].note == "" and events[-1].timeout_s == job.options.timeout_for("benchmark[size=65536]")
    assert ctx.phases.take()["calibration"] >= 0
    ctx.rung = "benchmark[size=4194304]"
    events.clear()
    second = device_calibration(ctx)
    assert second.calibration == first.calibration and second.measured_s is None and events == []
    assert "calibration_s" not in second.figures() and len(measured(fake_gpu)) == 1
