"""``ktui profile`` / ``ktui sanitize`` / ``--sections`` on a machine without a GPU: every failure is a
clear message, an exit code and (with --json) the contract's lines — never a hang."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from conftest import ktui, make_workspace, parse_events
from waits import SAFETY_S, gone, until

from ktui.profiling.external import ToolFailed, child_env, prepare, run_tool
from ktui.profiling.profile import (
    PERMISSION_HELP,
    ProfileOptions,
    explain_ncu_failure,
    hot_lines,
    ncu_command,
    run_ncu,
)
from ktui.profiling.sanitize import parse_output
from ktui.profiling.sections import sections_from_tree
from ktui.worker.dsl.proton import proton_support

SYSTEM_NCU = [Path("/usr/local/cuda/bin/ncu"), *Path("/opt/nvidia").glob("nsight-compute/*/ncu")]
SYSTEM_SANITIZER = [Path("/usr/local/cuda/bin/compute-sanitizer")]
# ncu's own words when counters are locked (as it prints them, on stdout)
PERM_TEXT = ("==PROF== Connected to process 4242 (/usr/bin/python3)\n"
             "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
             "on the target device 0. For instructions on enabling permissions and to get more information see "
             "https://developer.nvidia.com/ERR_NVGPUCTRPERM\n"
             "==PROF== Disconnected from process 4242\n"
             "==WARNING== No kernels were profiled.\n")


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("ws"), kernels=["softmax_triton"], fixtures=["softmax_sections"])


def _script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _env_without_tools(bin_dir: Path | None = None) -> dict:
    """PATH with only the Python in use (and ``bin_dir``): no ncu, no compute-sanitizer, no CUDA_HOME."""
    path = [str(Path(sys.executable).parent), "/usr/bin", "/bin"]
    if bin_dir is not None:
        path.insert(0, str(bin_dir))
    env = {"PATH": os.pathsep.join(path), "CUDA_HOME": "", "CUDA_PATH": "", "KTUI_NCU": "", "KTUI_COMPUTE_SANITIZER": ""}
    return env


@pytest.mark.worker
def test_profile_without_ncu_says_where_it_usually_is(ws):
    if any(p.exists() for p in SYSTEM_NCU):
        pytest.skip("this machine has ncu installed")
    proc = ktui("profile", "kernels/softmax_triton.py", "--json", cwd=ws, env=_env_without_tools())
    assert proc.returncode == 1
    (line,) = parse_events(proc.stdout)
    assert line["type"] == "profile_finished" and line["ok"] is False and line["summary"] is None
    assert "ncu (Nsight Compute) is not installed" in line["message"]
    assert "/usr/local/cuda/bin" in line["message"] and "/opt/nvidia/nsight-compute/<version>/" in line["message"]


@pytest.mark.worker
def test_profile_on_the_cpu_tier_says_no_gpu_before_starting_ncu(ws, tmp_path):
    marker = tmp_path / "ncu-was-started"
    bin_dir = tmp_path / "bin"
    _script(bin_dir, "ncu", f"touch {marker}\nexit 0\n")
    proc = ktui("profile", "kernels/softmax_triton.py", "--json", cwd=ws, env=_env_without_tools(bin_dir))
    assert proc.returncode == 1, proc.stderr
    lines = parse_events(proc.stdout)
    assert [l["type"] for l in lines] == ["profile_finished"]  # at once: nothing loaded first
    assert lines[-1]["ok"] is False and lines[-1]["message"].startswith("no GPU:")
    assert not marker.exists()


@pytest.mark.worker
def test_profile_of_a_bad_path_or_a_kernel_without_reference_cannot_run(ws, tmp_path):
    proc = ktui("profile", "kernels/missing.py", "--json", cwd=ws)
    assert proc.returncode == 2 and parse_events(proc.stdout)[-1]["ok"] is False
    orphan = ws / "kernels" / "orphan_triton.py"
    orphan.write_text("x = 1\n")
    proc = ktui("profile", "kernels/orphan_triton.py", cwd=ws)
    assert proc.returncode == 2 and "no reference" in proc.stderr


@pytest.fixture
def target(ws):
    t = prepare(ws / "kernels" / "softmax_triton.py")
    t.check = {"shape": {"rows": 4096, "cols": 4096}, "tier": "gpu"}
    yield t
    t.close()


@pytest.mark.worker
def test_locked_counters_map_to_how_to_enable_them(target, tmp_path):
    """Past the GPU check, ncu prints ERR_NVGPUCTRPERM: the message says how to allow profiling."""
    fake = _script(tmp_path / "bin", "ncu", f"cat <<'EOF'\n{PERM_TEXT}EOF\nexit 1\n")
    with pytest.raises(ToolFailed) as info:
        run_ncu(target, str(fake), ProfileOptions(timeout_s=30))
    assert str(info.value) == PERMISSION_HELP
    assert "NVreg_RestrictProfilingToAdminUsers=0" in str(info.value) and "root" in str(info.value)
    assert "ERR_NVGPUCTRPERM" in (target.run_dir / "ncu.log").read_text()  # ncu's own words are kept


@pytest.mark.worker
def test_a_hung_profile_is_killed_with_its_children_at_the_time_limit(target, tmp_path):
    pid_file = tmp_path / "child.pid"
    # an hour's sleep: ending at all, the run was ended by its 2 s limit
    fake = _script(tmp_path / "bin", "ncu", f"sleep 3600 &\necho $! > {pid_file}\nsleep 3600\n")
    with pytest.raises(ToolFailed, match=r"exceeded its 2 s limit.*--timeout"):
        run_ncu(target, str(fake), ProfileOptions(timeout_s=2))
    child = int(until(pid_file.read_text))
    assert until(lambda: not _alive(child))  # the whole process group went, not only ncu


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie nobody has reaped yet (PID 1 in a container may not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.worker
def test_a_kernel_crashing_under_replay_is_named_as_such(target, tmp_path):
    fake = _script(tmp_path / "bin", "ncu", "echo '==PROF== Connected to process 77'\n"
                   "echo '==ERROR== The application returned an error code (11).'\nexit 11\n")
    with pytest.raises(ToolFailed, match=r"(?s)crashed under ncu \(exit code 11\).*ktui sanitize.*error code \(11\)"):
        run_ncu(target, str(fake), ProfileOptions(timeout_s=30))


@pytest.mark.unit
def test_ncu_is_asked_for_the_nvtx_range_clock_control_and_a_report_in_the_run_folder(target):
    argv = ncu_command("ncu", ProfileOptions(), target.run_dir / "profile", ["python", "-m", "ktui.worker.target"])
    assert argv[argv.index("--nvtx-include") + 1] == "ktui_custom_kernel/"
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--export") + 1] == str(target.run_dir / "profile")
    assert target.run_dir.parent.parent.name == "runs" and "--nvtx" in argv
    full = ncu_command("ncu", ProfileOptions(set="full"), target.run_dir / "profile", [])
    assert full[full.index("--set") + 1] == "full"


@pytest.mark.unit
def test_every_set_collects_the_per_instruction_page_with_the_source(target):
    for options in (ProfileOptions(), ProfileOptions(set="full")):
        argv = ncu_command("ncu", options, target.run_dir / "profile", [])
        assert argv[argv.index("--import-source") + 1] == "yes"
        assert argv[argv.index("SourceCounters") - 1: argv.index("SourceCounters") + 1] == ["--section", "SourceCounters"]


@pytest.mark.worker
def test_a_source_page_ncu_cannot_export_leaves_a_note_not_a_failure(target, tmp_path):
    fake = _script(tmp_path / "bin", "ncu", "echo '==ERROR== unknown page' >&2\nexit 1\n")
    notes: list[str] = []
    assert hot_lines(str(fake), target.run_dir / "profile.ncu-rep", target, notes) == {}
    assert notes and notes[0].startswith("no hot lines: the source page could not be read")


@pytest.mark.unit
def test_no_kernel_in_the_range_is_explained():
    from ktui.profiling.external import ToolRun

    run = ToolRun(["ncu"], 0, "==PROF== Disconnected from process 1\n==WARNING== No kernels were profiled.\n", False, 1.0)
    assert "launched none inside the NVTX range" in explain_ncu_failure(run, {"ok": True}, 60)


@pytest.mark.worker
def test_run_tool_reports_output_and_exit_code(tmp_path):
    run = run_tool([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], 30,
                   env=child_env())
    assert (run.returncode, run.timed_out) == (3, False) and "out" in run.output and "err" in run.output


# -- sanitize ----------------------------------------------------------------------------------------


@pytest.mark.worker
def test_sanitize_without_compute_sanitizer_says_where_it_usually_is(ws):
    if any(p.exists() for p in SYSTEM_SANITIZER):
        pytest.skip("this machine has compute-sanitizer installed")
    proc = ktui("sanitize", "kernels/softmax_triton.py", cwd=ws, env=_env_without_tools())
    assert proc.returncode == 1 and "compute-sanitizer is not installed" in proc.stderr
    assert "/usr/local/cuda/bin" in proc.stderr


@pytest.mark.worker
def test_sanitize_on_the_cpu_tier_says_no_gpu(ws, tmp_path):
    bin_dir = tmp_path / "bin"
    _script(bin_dir, "compute-sanitizer", "exit 0\n")
    proc = ktui("sanitize", "kernels/softmax_triton.py", "--json", cwd=ws, env=_env_without_tools(bin_dir))
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["ok"] is False and out["message"].startswith("no GPU:")


# compute-sanitizer's report layout: "========= " prefix, one unindented headline per error, indented
# details, host backtraces, a summary line.
MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at add_kernel+0x1b0 in /ws/kernels/oob_read.py:18
=========     by thread (255,0,0) in block (12,0,0)
=========     Address 0x7f3a5e00c000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a5e000000 of size 49152 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f0a4b] in libcuda.so.1
=========
========= Invalid __global__ read of size 4 bytes
=========     at add_kernel+0x1c0 in /ws/kernels/oob_read.py:19
=========     by thread (254,0,0) in block (12,0,0)
=========     Address 0x7f3a5e01c000 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 66 errors
"""


@pytest.mark.unit
def test_sanitizer_errors_are_read_with_kernel_location_and_thread():
    count, errors = parse_output(MEMCHECK, {"add_kernel": "add_kernel"})
    assert count == 66 and len(errors) == 3
    first = errors[0]
    assert (first.message, first.kernel, first.source_fn) == ("Invalid __global__ read of size 4 bytes", "add_kernel", "add_kernel")
    assert (first.location, first.thread, first.block) == ("/ws/kernels/oob_read.py:18", "255,0,0", "12,0,0")
    assert first.details == ["Address 0x7f3a5e00c000 is out of bounds",
                             "and is 1 bytes after the nearest allocation at 0x7f3a5e000000 of size 49152 bytes"]
    assert errors[2].kernel == "" and errors[2].message.startswith("Program hit cudaErrorLaunchFailure")
    assert parse_output("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == (0, [])


# -- in-kernel sections ------------------------------------------------------------------------------


@pytest.mark.unit
def test_the_installed_triton_says_plainly_whether_it_has_proton_scopes():
    import triton

    support = proton_support()
    assert support["triton"] == triton.__version__
    try:
        import triton.profiler.language as pl
    except ImportError:
        assert support["supported"] is False and "no Proton" in support["reason"]
        return
    assert support["supported"] is True
    if hasattr(pl, "enable_semantic"):  # Triton ≥3.5: Gluon by default, Triton DSL on request
        assert "enable_semantic" in support["reason"]


@pytest.mark.worker
def test_sections_on_the_cpu_tier_say_no_gpu(ws):
    proc = ktui("profile", "kernels/softmax_sections.py", "--sections", "--json", cwd=ws)
    assert proc.returncode == 1
    last = parse_events(proc.stdout)[-1]
    assert last["type"] == "profile_finished" and last["ok"] is False
    assert last["message"].startswith(("no GPU:", "in-kernel sections are not supported"))


@pytest.mark.worker
def test_a_kernel_with_proton_scopes_runs_in_the_cpu_interpreter(ws):
    proc = ktui("run", "--no-audit", "--no-bench", "--seed", "2", "kernels/softmax_sections.py", cwd=ws)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "softmax_sections v1 passed" in proc.stdout


@pytest.mark.unit
def test_proton_tree_becomes_sections_with_shares_of_the_outermost_scopes():
    # the hatchet layout Proton writes: frames with metrics and children, the kernel's frame on top
    tree = [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": [
        {"frame": {"name": "softmax_kernel", "type": "function"}, "metrics": {}, "children": [
            {"frame": {"name": "load", "type": "function"}, "metrics": {"cycles": 600}, "children": []},
            {"frame": {"name": "reduce", "type": "function"}, "metrics": {"cycles": 300}, "children": [
                {"frame": {"name": "exp", "type": "function"}, "metrics": {"cycles": 100}, "children": []}]},
            {"frame": {"name": "store", "type": "function"}, "metrics": {"cycles": 100}, "children": []},
        ]}]}, {"CUDA": {}}]
    metric, sections = sections_from_tree(tree)
    assert metric == "cycles"
    assert [(s.kernel, s.name, s.share_pct) for s in sections] == [
        ("softmax_kernel", "load", 60.0), ("softmax_kernel", "reduce", 30.0),
        ("softmax_kernel", "reduce/exp", 10.0), ("softmax_kernel", "store", 10.0)]


GPU_FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"


def _recorded(name: str) -> str:
    path = GPU_FIXTURES / name
    if not path.is_file():
        pytest.skip(f"recorded fixture {name} not checked in yet (run tests/benchmarks/record_gpu_fixtures.sh on the H200)")
    return path.read_text()


@pytest.mark.unit
def test_recorded_memcheck_report_names_the_out_of_bounds_kernel():
    count, errors = parse_output(_recorded("sanitize_oob.log"), {"add_kernel": "add_kernel"})
    assert count >= 1 and errors
    assert errors[0].kernel == "add_kernel" and "read" in errors[0].message.lower()


@pytest.mark.unit
def test_recorded_proton_tree_has_the_fixture_scopes():
    _, sections = sections_from_tree(json.loads(_recorded("sections_softmax.hatchet")))
    assert {s.path[0] for s in sections} >= {"load", "reduce", "store"}


@pytest.mark.worker
def test_cancelling_the_dashboards_profile_kills_what_ktui_profile_started_in_other_sessions(tmp_path, monkeypatch):
    """The pre-flight's target runs in a session of its own (as ncu does): a cancel must reach it too."""
    import threading
    import uuid

    from ktui.protocol.notices import ProfileFinished
    from ktui.watch.profile_task import profile_task
    from ktui.workspace.kernels import kernel_for

    ws = make_workspace(tmp_path / "ws")
    kernel_file = ws / "kernels" / "stuck_triton.py"
    kernel_file.write_text('import subprocess\n\nREFERENCE = "add"\nsubprocess.run(["ktui-standin-tool"])\n\n\n'
                           "def custom_kernel(x, y):\n    return x + y\n")
    started = ws / ".ktui" / "runs" / "standin-started"  # user code is confined: it writes only beneath runs/
    _script(tmp_path / "bin", "ktui-standin-tool", f"touch {started}\nsleep 600\n")
    tag = uuid.uuid4().hex
    monkeypatch.setenv("KTUI_PROFILE_TEST_TAG", tag)
    for key, value in _env_without_tools(tmp_path / "bin").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("KTUI_NCU", str(_script(tmp_path / "ncu-bin", "ncu", "sleep 600\n")))
    monkeypatch.setenv("KTUI_SKIP_GPU_CHECK", "1")  # so the pre-flight runs, and hangs, on this CPU machine

    def tagged() -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and f"KTUI_PROFILE_TEST_TAG={tag}".encode() in (
                        entry / "environ").read_bytes().split(b"\0") and \
                        (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(entry.name))
            except OSError:
                continue
        return pids

    notices: list = []

    class Loop:
        listener = staticmethod(notices.append)

    cancelled = threading.Event()
    task = threading.Thread(target=profile_task(Loop()), args=(kernel_for(kernel_file), cancelled))
    task.start()
    assert until(lambda: started.exists() and len(tagged()) >= 4)  # ktui profile, the target, the stand-in's sh and sleep
    cancelled.set()
    task.join(timeout=SAFETY_S)
    assert not task.is_alive()
    assert isinstance(notices[-1], ProfileFinished) and notices[-1].ok is False
    assert gone(tagged) == []
