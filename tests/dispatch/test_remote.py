"""Remote runs over a real OpenSSH server on loopback: the "remote" is this machine in another
folder, reached through ssh with keys of the test's own, its Python this interpreter."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, finished, ktui, make_workspace, parse_events, rungs
from sshd import make_sshd
from waits import SAFETY_S, gone

from ktui.dispatch.remote.address import RemoteAddress, parse_remote
from ktui.dispatch.remote.runner import RemoteRunner
from ktui.dispatch.session import Session
from ktui.history.store import Store
from ktui.protocol.events import RunFinished, RungStarted
from ktui.protocol.job import Options
from ktui.protocol.processes import tagged
from ktui.workspace.kernels import kernel_at, kernel_for

pytestmark = pytest.mark.e2e

HOSTILE = "-x $(touch PWNED) it's \"q\" `id`.py"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = make_sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang", "crash_segfault"])


def remote_runner(sshd, tmp_path, sync="auto", folder="remote") -> RemoteRunner:
    return RemoteRunner(parse_remote(f"localhost:{tmp_path}/{folder}"), ssh_config=str(sshd.client_config),
                        python=sys.executable, sync=sync)


def remote_flags(sshd, tmp_path) -> list[str]:
    return ["--remote", f"localhost:{tmp_path}/remote", "--ssh-config", str(sshd.client_config),
            "--remote-python", sys.executable]


def _our_processes(needle: str) -> list[int]:
    """Live processes whose command line holds ``needle`` (this test's control folder, say)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle.encode() in (entry / "cmdline").read_bytes() \
                    and (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("value, expected", [
    ("gpu1", RemoteAddress("gpu1")),
    ("me@gpu1", RemoteAddress("gpu1", user="me")),
    ("me@gpu1:2222", RemoteAddress("gpu1", user="me", port=2222)),
    ("gpu1:/scratch/k/", RemoteAddress("gpu1", directory="/scratch/k")),
    ("me@gpu1.lab:2222:/scratch/k", RemoteAddress("gpu1.lab", user="me", port=2222, directory="/scratch/k")),
    ("gpu1:~/ktui", RemoteAddress("gpu1", directory="~/ktui")),
])
def test_remote_addresses_parse_into_user_host_port_and_folder(value, expected):
    assert parse_remote(value) == expected


@pytest.mark.parametrize("value, says", [
    ("", "needs a host"),
    ("-oProxyCommand=sh", "is not a host name"),
    ("gpu 1", "is not a host name"),
    ("gpu1:http", "the port must be a number"),
    ("gpu1:70000", "the port must be a number"),
    ("-l@gpu1", "is not a user name"),
    ("gpu1:/", "must name a folder"),
])
def test_a_bad_remote_address_is_refused_with_the_expected_form(value, says):
    with pytest.raises(ValueError, match=says):
        parse_remote(value)


def test_the_cli_refuses_a_remote_that_ssh_would_read_as_an_option(ws):
    proc = ktui("run", "--no-audit", "--remote=-oProxyCommand=touch PWNED", "kernels/add_triton.py", cwd=ws, timeout=60)
    assert proc.returncode == 2
    assert "is not a host name" in proc.stderr
    assert not (ws / "PWNED").exists()


def test_the_cpu_tier_run_remotely_matches_a_local_run_and_its_files_come_back(sshd, ws, tmp_path):
    local = ktui("run", "--no-audit", "--json", "--seed", "7", "kernels/add_triton.py", cwd=ws, timeout=300)
    remote = ktui("run", "--no-audit", "--json", "--seed", "7", *remote_flags(sshd, tmp_path), "kernels/add_triton.py",
                  cwd=ws, timeout=300)
    assert remote.returncode == local.returncode == 0, remote.stderr
    here, there = parse_events(local.stdout), parse_events(remote.stdout)
    assert finished(there)["verdict"] == finished(here)["verdict"] == "passed"
    assert list(rungs(there)) == list(rungs(here))
    for name, rung in rungs(here).items():
        assert rungs(there)[name]["status"] == rung["status"], name
    # the same seeds give the same inputs: the correctness figures agree within float noise
    checked = 0
    for name, rung in rungs(here).items():
        figures, theirs = rung.get("figures") or {}, rungs(there)[name].get("figures") or {}
        assert set(theirs) == set(figures), name
        for key in ("seed", "numel", "mismatched", "nonfinite", "max_abs", "max_rel", "worst_out", "cossim"):
            if key in figures:
                assert theirs[key] == pytest.approx(figures[key], rel=1e-6, abs=1e-9), (name, key)
                checked += 1
    assert checked >= 5 * 6
    assert finished(there)["summary"]["correct"] == finished(here)["summary"]["correct"]
    # the events speak of local paths, and the run folder is where a local run puts it
    start = next(e for e in there if e["type"] == "run_started")
    assert start["path"] == str(ws / "kernels" / "add_triton.py")
    local_start = next(e for e in here if e["type"] == "run_started")
    assert start["run_dir"] == local_start["run_dir"]  # the same bytes: the same version, the same folder
    run_dir = Path(start["run_dir"])
    assert {"report.json", "source.py", "add_kernel.ptx"} <= {p.name for p in run_dir.iterdir()}
    assert str(tmp_path / "remote") not in remote.stdout
    assert finished(there)["summary"]["host"] == "localhost"
    store = Store.of(ws / ".ktui")
    try:
        runs = store.runs("add_triton")
        assert sorted(str(r.summary.get("host")) for r in runs) == ["None", "localhost"]
    finally:
        store.close()
    # nothing was written on the remote outside its folder
    assert [p.name for p in (tmp_path / "remote").iterdir()] and all(
        p.is_dir() for p in (tmp_path / "remote").iterdir())


def test_a_remote_worker_s_first_calibration_is_measured_there_beside_it_and_it_cannot_write_it(sshd, tmp_path):
    """The first benchmark on the remote's GPU asks for a calibration as a local one does: measured on
    the remote by a process started there beside the worker, not confined, and kept in the remote
    user's folder, which the remote worker reads and cannot write (the fake GPU: the local one's
    test, tests/worker/test_confine_calibration.py)."""
    from ktui.dispatch.remote.address import parse_remote
    from ktui.worker.timing.calibrate import MEASURE_ENV

    ws = make_workspace(tmp_path / "ws", hacks=["forges_calibration"])
    shutil.copy(FIXTURES / "calibration" / "fake_gpu.py", ws / "kernels" / "fake_gpu.py")  # synced: the remote worker reads it there
    runner = RemoteRunner(parse_remote(f"localhost:{tmp_path}/remote"), ssh_config=str(sshd.client_config))
    remote_ws = runner.base_for(str(ws.resolve())) + "/ws"
    runner.close()
    (tmp_path / "log").mkdir()
    log, user = tmp_path / "log" / "measured.log", tmp_path / "remote-user"
    proc = ktui("run", "--no-audit", "--json", "--no-bench", *remote_flags(sshd, tmp_path),
                "kernels/hack_forges_calibration.py", cwd=ws, timeout=300,
                env={"KTUI_USER_DIR": str(user), MEASURE_ENV: f"{remote_ws}/kernels/fake_gpu.py", "FAKE_GPU_LOG": str(log)})
    events = parse_events(proc.stdout)
    said = [e["text"] for e in events if e["type"] == "output" and e["text"].startswith("FORGE ")]
    assert said, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(said[0].removeprefix("FORGE "))
    kept = user / "calibration" / "NVIDIA_H200_driver_570.124.06.json"
    assert finished(events)["summary"]["host"] == "localhost" and report["kept"] == str(kept)
    assert report["write_before"] == report["write_after"] == "PermissionError" and "ask_error" not in report
    assert [a["measured"] for a in report["asked"]] == [True, False] and report["asked"][0]["path"] == str(kept)
    assert report["steps"][0].startswith("measuring NVIDIA H200 (driver 570.124.06) once")
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and int(lines[0].split()[0]) != report["pid"]  # measured once, beside the worker
    assert json.loads(kept.read_text())["bandwidth_gbs"] == 4393.0


@pytest.mark.parametrize("sync", ["rsync", "tar"])
def test_a_hostile_file_name_syncs_and_runs_without_reaching_a_shell(sshd, ws, tmp_path, sync):
    (ws / "kernels" / HOSTILE).write_text((REPO / "kernels" / "add_triton.py").read_text())
    (ws / "kernels" / "-n 'data' $(touch PWNED).txt").write_text("kept\n")
    runner = remote_runner(sshd, tmp_path, sync, folder="-remote $(touch PWNED) 'it's'")
    session = Session(ws, runner=runner)
    try:
        end = session.run(kernel_at(ws / "kernels" / HOSTILE), Options(seed=3, benchmark=False))
        base = Path(runner.base_for(str(ws)))
    finally:
        session.close()
    assert end.verdict == "passed", end.message
    assert (base / "ws" / "kernels" / HOSTILE).read_text() == (ws / "kernels" / HOSTILE).read_text()
    assert (base / "ws" / "kernels" / "-n 'data' $(touch PWNED).txt").read_text() == "kept\n"
    assert not list(tmp_path.rglob("PWNED")) and not (Path.home() / "PWNED").exists()
    kernel_id = kernel_at(ws / "kernels" / HOSTILE).id
    assert (ws / ".ktui" / "runs" / kernel_id / "1" / "report.json").is_file()


def test_a_file_removed_here_is_removed_from_the_remote_workspace(sshd, ws, tmp_path):
    helper = ws / "kernels" / "helper_data.txt"
    helper.write_text("x")
    runner = remote_runner(sshd, tmp_path, "tar")
    session = Session(ws, runner=runner)
    try:
        good = kernel_at(ws / "kernels" / "add_triton.py")
        session.run(good, Options(seed=1, benchmark=False))
        base = Path(runner.base_for(str(ws)))
        assert (base / "ws" / "kernels" / "helper_data.txt").exists()
        helper.unlink()
        session.run(good, Options(seed=2, benchmark=False))
        assert not (base / "ws" / "kernels" / "helper_data.txt").exists()
    finally:
        session.close()


def _hang_until(session, runner, job, action):
    """Run ``job`` (the hanging kernel) and call ``action`` once its compile rung started."""
    verdicts, messages = [], []
    for event in session.events(job):
        if isinstance(event, RungStarted) and event.rung == "compile":
            threading.Timer(0.5, action).start()
        if isinstance(event, RunFinished):
            verdicts.append(event.verdict)
            messages.append(event.message)
    return verdicts, messages


def test_cancel_kills_the_remote_worker_group_and_the_next_run_is_warm_again(sshd, ws, tmp_path):
    runner = remote_runner(sshd, tmp_path)
    session = Session(ws, runner=runner)
    try:
        job = session.prepare(kernel_at(ws / "kernels" / "hang.py"), Options(timeouts={"compile": 120}))
        tokens = []
        verdicts, _ = _hang_until(session, runner, job, lambda: (tokens.append(runner.worker._worker.proc.token), runner.cancel()))
        assert verdicts == ["cancelled"]
        assert not gone(lambda: tagged(tokens[0]))  # the remote worker and all it started
        good = session.run(kernel_at(ws / "kernels" / "add_triton.py"), Options(seed=5, benchmark=False))
        assert good.verdict == "passed"
    finally:
        session.close()


def test_a_dropped_link_ends_the_run_interrupted_leaves_nothing_behind_and_the_next_run_reconnects(ws, tmp_path):
    server = make_sshd(tmp_path / "own-sshd")  # this test kills its server
    server.start()
    runner = remote_runner(server, tmp_path)
    session = Session(ws, runner=runner)
    control = runner.link._control_dir
    try:
        job = session.prepare(kernel_at(ws / "kernels" / "hang.py"), Options(timeouts={"compile": 3600}))
        tokens = []
        verdicts, messages = _hang_until(session, runner, job,
                                         lambda: (tokens.append(runner.worker._worker.proc.token), server.stop()))
        assert verdicts == ["interrupted"]  # not the compile limit's timed_out: the link's end is noticed
        assert "the link to localhost dropped during compile" in messages[0]
        assert not gone(lambda: tagged(tokens[0]))  # nothing left running on the remote
        assert not gone(lambda: _with_environ(str(tmp_path / "remote")))
        assert not gone(lambda: _our_processes(control))  # nor here: no ssh client, no master
        stored = {r.run_id: r for r in session.store.runs("hang")}[job.run_id]
        assert stored.verdict == "interrupted"

        server.start()
        good = session.run(kernel_at(ws / "kernels" / "add_triton.py"), Options(seed=6, benchmark=False))
        assert good.verdict == "passed", good.message
    finally:
        session.close()
        server.stop()
    assert not gone(lambda: _our_processes(control))


def test_a_run_while_the_remote_is_unreachable_ends_interrupted_at_once(ws, tmp_path):
    server = make_sshd(tmp_path / "never-started")
    runner = remote_runner(server, tmp_path)
    session = Session(ws, runner=runner)
    try:
        end = session.run(kernel_at(ws / "kernels" / "add_triton.py"), Options(seed=1))
    finally:
        session.close()
    assert end.verdict == "interrupted"
    assert "cannot reach localhost over ssh after 4 attempts" in end.message
    assert end.summary["host"] == "localhost"


def test_remote_check_prints_one_line_per_thing_a_run_needs(sshd, tmp_path):
    proc = ktui("remote", "check", "localhost", "--ssh-config", str(sshd.client_config),
                "--remote-python", sys.executable, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[1]: line.strip() for line in proc.stdout.splitlines()[1:]}
    assert list(lines) == ["python", "torch", "triton", "cutedsl", "tilelang", "ktui", "gpu", "ncu", "compute-sanitizer"]
    import torch
    import triton

    assert torch.__version__ in lines["torch"] and triton.__version__ in lines["triton"]
    assert lines["python"].startswith("ok") and sys.executable in lines["python"]
    assert "ktui" in lines["ktui"] and lines["ktui"].startswith("ok")


def test_remote_check_of_an_unreachable_host_says_so(tmp_path):
    server = make_sshd(tmp_path / "never-started")
    proc = ktui("remote", "check", "localhost", "--ssh-config", str(server.client_config), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert "cannot reach localhost over ssh" in proc.stderr
    assert os.path.exists(server.client_config)


def _with_environ(needle: str) -> list[int]:
    """Live processes whose environment mentions ``needle`` (a remote folder: its agent and worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle.encode() in (entry / "environ").read_bytes() \
                    and (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_watch_headless_runs_on_the_remote_and_leaves_nothing_there_when_it_stops(sshd, tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--no-audit", "--no-bench",
                             *remote_flags(sshd, tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        end = None
        for line in proc.stdout:
            event = json.loads(line)
            if event.get("type") == "run_finished":
                end = event
                break
        assert end is not None, proc.stderr.read() if proc.poll() is not None else "no run_finished"
        assert end["verdict"] == "passed" and end["summary"]["host"] == "localhost"
        assert _with_environ(str(tmp_path / "remote")), "the remote worker is warm"
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not gone(lambda: _with_environ(str(tmp_path / "remote")))


def test_a_reference_outside_the_workspace_is_refused_for_a_remote_run(sshd, ws, tmp_path):
    outside = tmp_path / "elsewhere" / "add_ref.py"
    outside.parent.mkdir()
    outside.write_text((ws / "references" / "add.py").read_text())
    proc = ktui("run", "--no-audit", "--json", "--reference", str(outside), *remote_flags(sshd, tmp_path), "kernels/add_triton.py",
                cwd=ws, timeout=120)
    end = finished(parse_events(proc.stdout))
    assert end["verdict"] == "error" and proc.returncode == 2
    assert "is outside the workspace" in end["message"] and "a remote run sends the workspace only" in end["message"]


def test_the_dashboard_runs_on_the_remote_and_its_status_line_names_the_host_and_link(sshd, tmp_path):
    import asyncio

    from ktui.tui.app import KtuiApp
    from ktui.tui.panes.status_bar import StatusBar
    from ktui.workspace.folder import Workspace

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    runner = remote_runner(sshd, tmp_path)

    async def scenario() -> tuple[str, str]:
        app = KtuiApp(Workspace.at(ws), Options(benchmark=False), runners=[runner])
        async with app.run_test(size=(160, 40)) as pilot:
            deadline = time.monotonic() + SAFETY_S
            while time.monotonic() < deadline:
                await pilot.pause(0.2)
                view = app.state.kernels.get("add_triton")
                if view is not None and view.verdict == "passed":
                    break
            bar = app.query_one(StatusBar)
            app._fill_status()
            await pilot.pause()
            return app.state.kernels["add_triton"].verdict, bar._text(bar.info).plain

    verdict, line = asyncio.run(scenario())
    assert verdict == "passed"
    assert "remote localhost · up" in line
    assert not gone(lambda: _with_environ(str(tmp_path / "remote")))  # the dashboard's exit ended it


def test_a_remote_crash_is_a_crash_with_the_remote_signal_and_a_timeout_names_where_the_kernel_was(sshd, ws, tmp_path):
    runner = remote_runner(sshd, tmp_path)
    session = Session(ws, runner=runner)
    try:
        crash = session.run(kernel_at(ws / "kernels" / "crash_segfault.py"), Options(seed=1))
        assert crash.verdict == "crashed" and "SIGSEGV" in crash.message, crash.message
        hang = session.run(kernel_at(ws / "kernels" / "hang.py"), Options(timeouts={"compile": 4}))
        assert hang.verdict == "timed_out"
        assert "compile exceeded its 4 s limit" in hang.message
        assert "it was at kernels/hang.py:" in hang.message  # the remote worker's stack, asked for there
        good = session.run(kernel_at(ws / "kernels" / "add_triton.py"), Options(seed=2, benchmark=False))
        assert good.verdict == "passed"
    finally:
        session.close()
    assert not gone(lambda: _with_environ(str(tmp_path / "remote")))


def test_a_key_the_remote_does_not_accept_fails_with_what_ssh_said_and_never_prompts(sshd, ws, tmp_path):
    stranger = tmp_path / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    config = tmp_path / "ssh_config"
    config.write_text(sshd.client_config.read_text().replace(str(sshd.folder / "client_key"), str(stranger)))
    proc = ktui("run", "--no-audit", "--remote", f"localhost:{tmp_path}/remote", "--ssh-config", str(config),
                "--remote-python", sys.executable, "kernels/add_triton.py", cwd=ws, timeout=60)
    # said once, before any kernel: could not run (2), and no run recorded as interrupted
    assert proc.returncode == 2
    assert "Permission denied" in proc.stderr and "interrupted" not in proc.stdout + proc.stderr
    assert not (ws / ".ktui" / "history.db").exists() or "interrupted" not in ktui("history", "kernels/add_triton.py",
                                                                                 cwd=ws).stdout


@pytest.mark.parametrize("sync", ["rsync", "tar"])
def test_a_gpumode_module_kept_beside_the_problem_folder_is_synced_and_named_by_its_remote_copy(sshd, tmp_path, sync):
    shutil.copytree(FIXTURES / "gpumode", tmp_path / "gpumode")  # scaleadd/task.yml: utils.py from ../utils.py
    problem, utils = tmp_path / "gpumode" / "scaleadd", tmp_path / "gpumode" / "utils.py"
    runner = remote_runner(sshd, tmp_path, sync=sync)
    session = Session(problem, runner=runner)
    try:
        job = session.prepare(kernel_for(problem / "submission.py"), Options(seed=7))
        staged = runner.stage(job)
        there = staged.job.problem["modules"]["utils"]
        assert there.startswith(staged.base + "/outside/") and Path(there).read_text() == utils.read_text()
        assert staged.back.text(f'File "{there}", line 1') == f'File "{utils}", line 1'  # a message naming the copy names the local file
        utils.write_text(utils.read_text() + "\nEDITED = True\n")
        assert Path(runner.stage(job).job.problem["modules"]["utils"]).read_text().endswith("EDITED = True\n")
    finally:
        session.close()
    if sync == "tar":
        return  # the run below syncs as ssh finds best: once is enough
    proc = ktui("run", "--no-audit", "--json", "--seed", "7", *remote_flags(sshd, tmp_path), "submission.py", cwd=problem, timeout=300)
    end = finished(parse_events(proc.stdout))
    assert proc.returncode == 0 and end["verdict"] == "passed", proc.stdout[-2000:] + proc.stderr
    assert end["summary"]["host"] == "localhost"


def test_ktui_run_on_an_unreachable_remote_says_so_once_exits_2_and_records_nothing(ws, tmp_path):
    from sshd import free_port

    config = tmp_path / "ssh_config"  # the real ssh client, at a port where nothing listens
    config.write_text(f"Host localhost\n  Port {free_port()}\n  BatchMode yes\n  StrictHostKeyChecking no\n"
                      f"  UserKnownHostsFile /dev/null\n")
    proc = ktui("run", "--no-audit", "kernels", "--no-bench", "--remote", f"localhost:{tmp_path}/remote", "--ssh-config", str(config),
                cwd=ws, timeout=180)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("cannot reach localhost over ssh") == 1, proc.stderr
    store = Store.of(ws / ".ktui")
    try:
        assert store.runs() == []
    finally:
        store.close()
