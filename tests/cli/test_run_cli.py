"""``ktui run`` on the shipped kernels (CPU tier), its lines, its JSON, its files and exit codes."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO, by_kernel, finished, make_workspace, parse_events, rungs
from waits import SAFETY_S, gone

from ktui.cli.exits import exit_code
from ktui.history.store import Store


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory, warm_ktui):
    root = make_workspace(tmp_path_factory.mktemp("ws"), kernels=["softmax_triton", "add_triton"])
    proc = warm_ktui("run", "--no-audit", "--json", "--seed", "11", "kernels/softmax_triton.py", "kernels/add_triton.py", cwd=root)
    return root, proc, by_kernel(parse_events(proc.stdout))


@pytest.mark.worker
def test_shipped_triton_kernels_pass_every_rung_that_runs_on_cpu(softmax_run):
    _, proc, kernels = softmax_run
    assert proc.returncode == 0, proc.stderr
    for name in ("softmax_triton", "add_triton"):
        r = rungs(kernels[name])
        assert finished(kernels[name])["verdict"] == "passed"
        assert {"pre-checks", "compile", "dumps", "run", "fresh-shapes"} <= {k for k, v in r.items() if v["status"] == "ok"}
        checks = [v for k, v in r.items() if k.startswith("correctness[")]
        assert checks and all(v["status"] == "ok" for v in checks)
        benches = [v for k, v in r.items() if k.startswith("benchmark[")]
        assert benches and all(v["status"] == "skipped" and "no GPU" in v["message"] for v in benches)


@pytest.mark.worker
def test_the_json_stream_is_ordered_and_typed(softmax_run):
    events = softmax_run[2]["softmax_triton"]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert events[0]["tier"] == "cpu" and events[0]["arch"] == "sm_90a"
    open_rung = None
    for e in events[1:-1]:
        if e["type"] == "rung_started":
            assert open_rung is None
            open_rung = e["rung"]
        elif e["type"] == "rung_finished" and e["status"] != "skipped":
            assert e["rung"] == open_rung
            open_rung = None


@pytest.mark.worker
def test_correctness_reports_every_metric_with_the_seed(softmax_run):
    r = rungs(softmax_run[2]["softmax_triton"])
    figures = r["correctness[rows=128,cols=1000]"]["figures"]
    for key in ("max_abs", "max_rel", "mse", "rmse", "psnr", "cossim", "worst_index", "seed"):
        assert key in figures
    assert figures["cossim"] > 0.99999
    bf16 = r["correctness[rows=64,cols=2048,dtype=bfloat16]"]["figures"]
    assert bf16["dtype"] == "bfloat16" and bf16["psnr"] > 45


@pytest.mark.worker
def test_dumps_hold_every_triton_stage_and_real_sm90a_sass(softmax_run):
    root, _, kernels = softmax_run
    start = kernels["softmax_triton"][0]
    run_dir = Path(start["run_dir"])
    assert run_dir == root / ".ktui" / "runs" / "softmax_triton" / "1"
    for ext in ("ttir", "ttgir", "llir", "ptx", "cubin", "sass"):
        assert (run_dir / f"softmax_kernel.{ext}").stat().st_size > 0, ext
    assert ".target sm_90a" in (run_dir / "softmax_kernel.ptx").read_text()
    assert (run_dir / "softmax_kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    sass = (run_dir / "softmax_kernel.sass").read_text()
    assert re.search(r"\bEXIT\b", sass) and "MUFU.EX2" in sass
    resources = json.loads((run_dir / "resources.json").read_text())
    assert resources["softmax_kernel"]["registers"] > 0
    assert (run_dir / "source.py").read_text() == (root / "kernels" / "softmax_triton.py").read_text()
    artifacts = {e["kind"] for e in kernels["softmax_triton"] if e["type"] == "artifact"}
    assert {"ttir", "ttgir", "llir", "ptx", "cubin", "sass", "resources", "hotspots"} <= artifacts


@pytest.mark.worker
def test_dumps_attribute_the_sass_to_the_kernels_own_lines(softmax_run):
    root, _, kernels = softmax_run
    run_dir = Path(kernels["softmax_triton"][0]["run_dir"])
    data = json.loads((run_dir / "hotspots.json").read_text())
    assert data["source"] == "softmax_triton.py"
    (fn,) = data["functions"]
    source = (root / "kernels" / "softmax_triton.py").read_text().splitlines()
    loads = [x for x in fn["lines"] if x["counts"].get("global_load")]
    stores = [x for x in fn["lines"] if x["counts"].get("global_store")]
    assert loads and all("tl.load(" in source[x["line"] - 1] for x in loads)
    assert stores and all("tl.store(" in source[x["line"] - 1] for x in stores)
    assert "softmax_kernel:" in (run_dir / "hotspots.txt").read_text()


@pytest.mark.worker
def test_reports_land_where_an_agent_can_cat_them(softmax_run):
    root, _, kernels = softmax_run
    latest = json.loads((root / ".ktui" / "latest" / "softmax_triton.json").read_text())
    assert latest["verdict"] == "passed" and latest["version"] == 1
    assert any(r["rung"] == "dumps" for r in latest["rungs"])
    report = Path(kernels["softmax_triton"][0]["run_dir"]) / "report.json"
    assert json.loads(report.read_text())["run_id"] == latest["run_id"]


@pytest.mark.worker
def test_plain_lines_name_each_rung_with_its_figures(tmp_path, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=["softmax_triton"])
    proc = warm_ktui("run", "--no-audit", "kernels/softmax_triton.py", cwd=root)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    line = next(x for x in lines if x.startswith("[correctness[rows=128,cols=1000]]"))
    assert re.fullmatch(r"\[correctness\[rows=128,cols=1000\]\] ok max_abs=\S+ max_rel=\S+ rmse=\S+ psnr=[\d.]+ cossim=1\.000000", line)
    assert "[benchmark ×3] skipped — no GPU: timing needs CUDA (CPU tier)" in lines  # one line for one reason
    assert not [x for x in lines if x.startswith("[benchmark[")]
    assert re.match(r"softmax_triton v1 passed · 6/6 correct · trust pending: reference not audited yet: a trivial "
                    r"kernel might pass its test · cpu sm_90a · [\d.]+ s", lines[-1])


@pytest.mark.worker
def test_a_reference_version_is_sized_once_and_later_runs_take_its_sizes_from_the_history(tmp_path, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    def pre_checks() -> dict:
        proc = warm_ktui("run", "--no-audit", "--no-bench", "--json", "kernels/add_triton.py", cwd=root)
        assert proc.returncode == 0, proc.stderr
        return next(e for e in parse_events(proc.stdout) if e["type"] == "rung_finished" and e["rung"] == "pre-checks")

    first = pre_checks()["figures"]
    path = root / "kernels" / "add_triton.py"
    path.write_text(path.read_text().replace("block = 1024", "block = 512"))
    second = pre_checks()["figures"]
    assert first["sized"] == len(first["sizes"]) > 0 and second["sized"] == 0
    assert second["sizes"] == first["sizes"]


@pytest.mark.worker
def test_an_edit_makes_a_new_version_and_the_history_lists_both(tmp_path, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    assert warm_ktui("run", "--no-audit", "kernels/add_triton.py", "--seed", "1", cwd=root).returncode == 0
    path = root / "kernels" / "add_triton.py"
    path.write_text(path.read_text().replace("block = 1024", "block = 512"))
    assert warm_ktui("run", "--no-audit", "kernels/add_triton.py", "--seed", "2", cwd=root).returncode == 0
    hist = warm_ktui("history", "kernels/add_triton.py", "--json", cwd=root)
    versions = [json.loads(x)["version"] for x in hist.stdout.splitlines()]
    assert versions == [2, 1]
    plain = warm_ktui("history", "kernels/add_triton.py", cwd=root).stdout
    assert "add_triton v2 passed" in plain and "add_triton v1 passed" in plain


@pytest.mark.worker
@pytest.mark.parametrize(
    "args, code, words",
    [
        (["run", "no/such/path.py"], 2, "no such file"),
        (["run", "kernels/missing_reference.py"], 2, "nosuchop"),
        (["run", "kernels/wrong_values.py", "--no-bench", "--no-audit"], 1, "failed"),
        (["run", "kernels/add_triton.py", "--timeout", "compile"], 2, "RUNG=SECONDS"),
        (["run", "kernels/add_triton.py", "--fresh-shapes", "-1"], 2, "expected a count of shapes (0 or more), got '-1'"),
    ],
)
def test_exit_codes_separate_failure_from_could_not_run(tmp_path, args, code, words, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["missing_reference", "wrong_values"])
    proc = warm_ktui(*args, cwd=root)
    assert proc.returncode == code
    assert words in proc.stdout + proc.stderr


@pytest.mark.worker
def test_a_syntax_error_is_printed_at_its_line_by_the_parent_alone(tmp_path, warm_ktui):
    root = make_workspace(tmp_path / "ws", fixtures=["syntax_error"])
    proc = warm_ktui("run", "--no-audit", "kernels/syntax_error.py", cwd=root)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("· not run")  # no worker started, so none said where it ran
    assert lines[1].startswith("[pre-checks] failed — SyntaxError: ") and "(syntax_error.py:11:" in lines[1]
    assert "    at kernels/syntax_error.py:11:" in proc.stdout and ">11 |" in proc.stdout
    assert lines[-1].startswith("syntax_error v1 failed · pre-checks: SyntaxError")


@pytest.mark.unit
def test_compiled_exits_0_but_does_not_hide_a_failure_beside_it():
    """``compiled`` (CuTeDSL on the CPU tier: nothing ran) is not a pass, yet ``ktui run kernels/`` on
    a CPU machine must succeed; any real failure in the same run still decides the status."""
    assert exit_code(["compiled"]) == exit_code(["passed", "compiled"]) == 0
    assert exit_code(["compiled", "failed"]) == 1 and exit_code(["compiled", "suspicious"]) == 3


@pytest.mark.unit
def test_a_kernel_asked_for_and_left_without_a_verdict_never_exits_0():
    assert exit_code([], asked=1) == exit_code(["passed"], asked=2) == 2
    assert exit_code(["passed", "passed"], asked=2) == 0


def ktui_into_a_closed_pipe(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI writing into a pipe whose reader is already gone, as under ``| head -1``."""
    read, write = os.pipe()
    os.close(read)
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    try:
        return subprocess.run([sys.executable, "-m", "ktui", *args], cwd=cwd, stdout=write, stderr=subprocess.PIPE,
                              text=True, timeout=600, env={**os.environ, "PYTHONPATH": path, **(env or {})})
    finally:
        os.close(write)


def processes_with(marker: str) -> list[int]:
    """The processes whose environment holds ``marker``: what one ``ktui run`` started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.worker
def test_a_piped_history_whose_reader_closed_early_exits_quietly(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui_into_a_closed_pipe("history", "kernels/add_triton.py", cwd=ws)
    assert proc.stderr == "" and proc.returncode == 1


@pytest.mark.worker
def test_a_piped_run_whose_reader_closed_early_exits_quietly_and_stops_its_worker(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    marker = f"KTUI_PIPE_TEST={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    proc = ktui_into_a_closed_pipe("run", "--no-audit", "--json", "kernels/add_triton.py", cwd=ws, env={name: value})
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 1
    assert processes_with(marker) == []


@pytest.mark.worker
def test_a_run_exits_once_its_verdict_is_out_without_waiting_for_the_worker_to_wind_down(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    source = (root / "kernels" / "add_triton.py").read_text()
    (root / "kernels" / "add_slow_exit.py").write_text(
        source + "\n\nimport atexit, time\natexit.register(time.sleep, 3600)  # a worker that takes an hour to exit\n")
    marker = uuid.uuid4().hex
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--no-audit", "--no-bench", "kernels/add_slow_exit.py"], cwd=root,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path, "KTUI_EXIT_TEST": marker})
    summary = next(line for line in proc.stdout if line.startswith("add_slow_exit v1 "))
    assert proc.wait(timeout=SAFETY_S) == 0, summary  # long before the worker's hour
    # the kill is sent before ktui exits; the kernel finishes it
    assert gone(lambda: processes_with(f"KTUI_EXIT_TEST={marker}")) == []


@pytest.mark.worker
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_run_stopped_by_a_signal_is_recorded_cancelled_and_no_later_kernel_starts(tmp_path, sig):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--no-audit", "kernels/hang.py", "kernels/add_triton.py", "--no-bench"],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stdout:
            if line.startswith("== hang"):
                break
        time.sleep(3.0)  # hang now spins in its first call
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, out + err
    assert "hang v1 cancelled" in out and f"stopped by {name}" in out, out
    assert "cancelled: stopped" not in out  # the status is not said twice
    store = Store.of(ws / ".ktui")
    try:
        runs = store.runs()
    finally:
        store.close()
    assert [(r.kernel, r.verdict, r.message) for r in runs] == [("hang", "cancelled", f"cancelled: stopped by {name}")]
