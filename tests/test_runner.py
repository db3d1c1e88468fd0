"""Isolation: user code runs in a worker that can crash, hang or be cancelled without harm."""

import threading
import time

import pytest

from conftest import finished, ktui, make_workspace, parse_events, rungs
from ktui.loop.events import RunFinished, RungStarted
from ktui.loop.job import Options
from ktui.problem import kernel_at
from ktui.runner import LocalRunner
from ktui.session import Session


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang", "crash_segfault"])


def test_a_hanging_kernel_times_out_with_its_limit_and_the_worker_group_is_killed(ws):
    proc = ktui("run", "--json", "--timeout", "compile=4", "kernels/hang.py", cwd=ws, timeout=120)
    events = parse_events(proc.stdout)
    end = finished(events)
    assert end["verdict"] == "timed_out"
    assert "compile exceeded its 4 s limit" in end["message"]
    assert rungs(events)["compile"]["status"] == "timed_out"
    assert proc.returncode == 1


def test_the_warm_worker_is_reused_and_replaced_after_a_crash(ws):
    runner = LocalRunner()
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
    runner = LocalRunner()
    session = Session(ws, runner=runner)
    try:
        job = session.prepare(kernel_at(ws / "kernels" / "hang.py"), Options(timeouts={"compile": 120}))
        verdicts = []
        for event in session.events(job):
            if isinstance(event, RungStarted) and event.rung == "compile":
                threading.Timer(0.5, runner.cancel).start()
            if isinstance(event, RunFinished):
                verdicts.append(event.verdict)
        assert verdicts == ["cancelled"]
        started = time.monotonic()
        good = session.run(kernel_at(ws / "kernels" / "add_triton.py"), Options(seed=5))
        assert good.verdict == "passed" and time.monotonic() - started < 120
    finally:
        session.close()
