"""Isolation: user code runs in a worker that can crash, hang or be cancelled without harm."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, finished, ktui, make_workspace, parse_events, rungs
from waits import gone

from ktui.dispatch.runner import WorkerRunner
from ktui.dispatch.session import Session
from ktui.history.store import Store
from ktui.protocol.events import RunFinished, RungStarted
from ktui.protocol.job import Options
from ktui.protocol.processes import descendants, kill_all, start_ticks
from ktui.workspace.kernels import kernel_at

pytestmark = pytest.mark.worker


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang", "crash_segfault"])


def test_a_hanging_kernel_times_out_with_its_limit_and_the_worker_group_is_killed(ws):
    proc = ktui("run", "--no-audit", "--json", "--timeout", "compile=4", "kernels/hang.py", cwd=ws, timeout=120)
    events = parse_events(proc.stdout)
    end = finished(events)
    assert end["verdict"] == "timed_out"
    assert "compile exceeded its 4 s limit" in end["message"]
    assert rungs(events)["compile"]["status"] == "timed_out"
    assert proc.returncode == 1
    # where it was: the worker's Python stack, asked for before the kill
    timed_out = rungs(events)["compile"]
    line = timed_out["error"]["location"]["line"]
    assert line in (19, 20)  # the `while True: pass` loop, wherever the signal found it
    assert f"it was at kernels/hang.py:{line} in custom_kernel" in timed_out["message"]
    assert timed_out["error"]["location"]["file"].endswith("kernels/hang.py")
    assert "--timeout compile=SECONDS raises it" in timed_out["message"]


def test_the_warm_worker_is_reused_and_replaced_after_a_crash(ws):
    runner = WorkerRunner()
    session = Session(ws, runner=runner)
    try:
        good = kernel_at(ws / "kernels" / "add_triton.py")
        assert session.run(good, Options(seed=1)).verdict == "passed"
        first_pid = runner.describe()["pid"]
        assert session.run(good, Options(seed=2)).verdict == "passed"
        assert runner.describe()["pid"] == first_pid  # warm: same process

        crash = session.run(kernel_at(ws / "kernels" / "crash_segfault.py"), Options(seed=3))
        assert crash.verdict == "crashed" and "SIGSEGV" in crash.message

        assert session.run(good, Options(seed=4)).verdict == "passed"
        assert runner.describe()["pid"] != first_pid  # a fresh worker took over
    finally:
        session.close()


def test_cancel_ends_the_run_in_flight_as_cancelled(ws):
    runner = WorkerRunner()
    session = Session(ws, runner=runner)
    try:
        # an hour's compile limit: the next run passing at all did not wait for it
        job = session.prepare(kernel_at(ws / "kernels" / "hang.py"), Options(timeouts={"compile": 3600}))
        verdicts = []
        for event in session.events(job):
            if isinstance(event, RungStarted) and event.rung == "compile":
                threading.Timer(0.5, runner.cancel).start()
            if isinstance(event, RunFinished):
                verdicts.append(event.verdict)
        assert verdicts == ["cancelled"]
        good = session.run(kernel_at(ws / "kernels" / "add_triton.py"), Options(seed=5))
        assert good.verdict == "passed"
    finally:
        session.close()


SPAWNING = (REPO / "kernels" / "add_triton.py").read_text().replace(
    "def custom_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n",
    "def custom_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"
    "    import os, subprocess\n"
    "    subprocess.Popen(['sleep', os.environ['KTUI_TEST_SLEEP']])\n"
    "    subprocess.Popen(['sleep', os.environ['KTUI_TEST_SLEEP']], start_new_session=True)\n"
    "    if os.environ.get('KTUI_TEST_EXIT') == '1':\n"
    "        os._exit(3)\n",
)


def _sleepers(seconds: str) -> list[int]:
    """Live ``sleep SECONDS`` processes (zombies are already dead)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", seconds.encode()] \
                    and (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z":
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("dies", [False, True], ids=["worker_stays_warm", "worker_exits"])
def test_processes_started_by_user_code_do_not_outlive_the_run(tmp_path, monkeypatch, dies):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "spawner.py").write_text(SPAWNING)
    seconds = f"302.{os.getpid()}{int(dies)}"
    monkeypatch.setenv("KTUI_TEST_SLEEP", seconds)
    monkeypatch.setenv("KTUI_TEST_EXIT", "1" if dies else "0")
    runner = WorkerRunner()
    session = Session(ws, runner=runner)
    try:
        end = session.run(kernel_at(ws / "kernels" / "spawner.py"), Options(seed=1, benchmark=False))
        assert end.verdict == ("crashed" if dies else "passed"), (end.message, end.summary)
        # Gone although the warm worker lives on (or although the worker that started them is dead).
        assert gone(lambda: _sleepers(seconds)) == []
    finally:
        session.close()
        kill_all(_sleepers(seconds))


def test_a_worker_whose_watcher_was_killed_stops_and_its_run_is_marked_interrupted(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["hang"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--no-audit", "--timeout", "compile=300"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    workers: list[int] = []
    try:
        for line in proc.stdout:
            event = json.loads(line)
            if event["type"] == "rung_started" and event["rung"] == "compile":
                break
        workers = descendants(proc.pid)
        assert workers, "the worker is running the hung kernel"
        proc.kill()  # kill -9: no cleanup in the watcher runs
        proc.wait(timeout=30)
        assert gone(lambda: [p for p in workers if start_ticks(p) is not None]) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_all(workers)
    run = Store(ws / ".ktui" / "history.db").latest_run("hang")
    assert run.verdict == "interrupted" and f"pid {proc.pid}" in run.message


ADD = (REPO / "kernels" / "add_triton.py").read_text()
LEAKS_A_THREAD = ADD.replace("def custom_kernel(", '''import threading
import time

STARTED = []


def printer():
    n = 0
    while True:  # never ends: in a warm worker it would print into the next kernel's output
        print(f"leaked {n}", flush=True)
        n += 1
        time.sleep(0.02)


def custom_kernel(*args):
    if not STARTED:
        STARTED.append(threading.Thread(target=printer, name="printer"))
        STARTED[0].start()
    return add(*args)


def add(''', 1)
ENDS_ITS_THREAD = LEAKS_A_THREAD.replace("while True:", "for _ in range(2):")


def _run_with_output(session, kernel, seed):
    job = session.prepare(kernel, Options(seed=seed, benchmark=False))
    events = list(session.events(job))
    return events[-1], [e.text for e in events if e.type == "output"]


@pytest.mark.parametrize("ends", [False, True], ids=["left_running", "ended_by_itself"])
def test_a_run_that_leaves_a_thread_running_replaces_the_worker_and_the_next_output_is_its_own(ws, ends):
    (ws / "kernels" / "add_leaky.py").write_text(ENDS_ITS_THREAD if ends else LEAKS_A_THREAD)
    runner = WorkerRunner()
    session = Session(ws, runner=runner)
    try:
        assert _run_with_output(session, kernel_at(ws / "kernels" / "add_triton.py"), seed=0)[0].verdict == "passed"
        first_pid = runner.describe()["pid"]  # the warm worker, as the leaky kernel finds it
        leaky, _ = _run_with_output(session, kernel_at(ws / "kernels" / "add_leaky.py"), seed=1)
        assert leaky.verdict == "passed", leaky.message
        after, printed = _run_with_output(session, kernel_at(ws / "kernels" / "add_triton.py"), seed=2)
        assert after.verdict == "passed"
        assert not [line for line in printed if line.startswith("leaked")], printed[:5]
        if ends:
            assert "threads_left" not in leaky.summary and runner.describe()["pid"] == first_pid  # still warm
        else:
            assert leaky.summary["threads_left"] == ["printer (add_leaky.py:31)"]
            assert runner.describe()["pid"] != first_pid  # a fresh worker ran the next kernel
    finally:
        session.close()
