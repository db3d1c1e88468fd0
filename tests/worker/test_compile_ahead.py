"""Compile-ahead (``ktui.worker.ahead``): which shapes a run hands its helpers, how the pool deals
them out, and that the worker's end-of-job sweep spares its helpers and nothing else.

The pool is driven here by a scripted helper (a few lines of Python speaking the helper's
protocol); the real helpers compile Triton on a GPU (``test_compile_ahead_gpu.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest
from waits import SAFETY_S

from ktui.protocol import processes
from ktui.worker.ahead.helper import NICENESS
from ktui.worker.ahead.pool import AheadPool, shapes_ahead, submit_run, wanted
from ktui.worker.errors import RungSkipped

SCRIPTED = textwrap.dedent("""
    import json, sys
    print(json.dumps({"type": "ready"}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["shapes"] and request["shapes"][0].get("die"):
            sys.exit(3)
        print(json.dumps({"type": "done", "compiled": len(request["shapes"]), "shapes": request["shapes"]}), flush=True)
""")


def ctx_with(tests, benchmarks=(), fresh=None, benchmark=True, dsls=("triton",)):
    options = SimpleNamespace(benchmark=benchmark)
    return SimpleNamespace(tests=list(tests), benchmarks=list(benchmarks), fresh_plan=fresh,
                           job=SimpleNamespace(options=options, to_json=lambda: {"run_id": "r"}),
                           dsls=[SimpleNamespace(compiles_ahead=d == "triton") for d in dsls], ahead=None)


def ready_pool(size: int) -> AheadPool:
    pool = AheadPool(size, [sys.executable, "-c", SCRIPTED])
    pool.start()
    deadline = time.monotonic() + SAFETY_S
    while not all(h.ready.is_set() for h in pool.helpers):
        assert time.monotonic() < deadline, "the scripted helpers never said ready"
        time.sleep(0.01)
    return pool


def wait_idle(pool: AheadPool) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not all(h.idle.is_set() for h in pool.helpers if h.alive()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.unit
def test_a_session_on_a_gpu_keeps_one_helper_per_four_cores_unless_told_how_many():
    assert wanted(False, env="4", cpus=64) == 0 and wanted(False, cpus=64) == 0  # never off a GPU
    assert wanted(True, cpus=16) == 4  # the H200 machine: four (docs/measured.md)
    assert wanted(True, cpus=128) == 4 and wanted(True, cpus=8) == 2 and wanted(True, cpus=3) == 0
    assert wanted(True, env="", cpus=16) == 4
    assert wanted(True, env="0", cpus=16) == 0
    assert wanted(True, env="8", cpus=2) == 8
    assert wanted(True, env="99") == 0 and wanted(True, env="many") == 0  # the parent refused these already


@pytest.mark.unit
def test_a_bad_helper_count_is_refused_in_one_line_saying_what_is_allowed():
    assert processes.compile_ahead_helpers(None) is None and processes.compile_ahead_helpers(" 3 ") == 3
    for bad in ("many", "-1", "9", "2.5"):
        with pytest.raises(ValueError) as refused:
            processes.compile_ahead_helpers(bad)
        assert str(refused.value) == f"KTUI_COMPILE_AHEAD must be a whole number of helpers from 0 to 8, got {bad!r}"


@pytest.mark.worker
def test_a_session_with_a_bad_helper_count_stops_before_any_worker_starts(tmp_path):
    from conftest import ktui, make_workspace

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("watch", str(ws), "--headless", "--cpu", cwd=ws, timeout=120, env={"KTUI_COMPILE_AHEAD": "many"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "ktui: KTUI_COMPILE_AHEAD must be a whole number of helpers from 0 to 8, got 'many'" in proc.stderr
    assert "runner_ready" not in proc.stdout  # no worker was started


@pytest.mark.unit
def test_the_traced_shape_is_left_out_and_every_other_shape_is_handed_out_once():
    tests = [{"n": 1}, {"n": 7}, {"n": 7}, {"n": 100}]
    benches = [{"n": 100}, {"n": 4096}]
    got = shapes_ahead(ctx_with(tests, benches, fresh=[{"n": 33}, {"n": 1}]))
    # the compile rung traces the first benchmark shape: the worker compiles that one itself
    assert got == [{"n": 1}, {"n": 7}, {"n": 33}, {"n": 4096}]


@pytest.mark.unit
def test_without_benchmarks_the_first_test_is_traced_and_none_of_them_is_sent():
    got = shapes_ahead(ctx_with([{"n": 1}, {"n": 7}], [{"n": 4096}], fresh=RungSkipped("off"), benchmark=False))
    assert got == [{"n": 1}, {"n": 7}]
    assert shapes_ahead(ctx_with([{"n": 1}, {"n": 7}], fresh=[{"n": 9}])) == [{"n": 7}, {"n": 9}]


@pytest.mark.unit
def test_a_module_with_a_kernel_that_cannot_compile_ahead_hands_out_nothing():
    ctx = ctx_with([{"n": 1}, {"n": 7}], dsls=("triton", "cutedsl"))
    ctx.ahead = SimpleNamespace(size=1, helpers=[object()], submit=lambda job, shapes: pytest.fail("handed out"))
    assert submit_run(ctx) == {}


@pytest.mark.worker
def test_shapes_are_dealt_round_robin_to_the_idle_helpers_and_a_busy_one_is_passed_over():
    pool = ready_pool(2)
    try:
        shapes = [{"n": i} for i in range(5)]
        assert pool.submit({"run_id": "a"}, shapes) == {"shapes": 5, "helpers": 2}
        wait_idle(pool)
        got = sorted(n["n"] for h in pool.helpers for n in h.answers[-1]["shapes"])
        assert got == [0, 1, 2, 3, 4]
        pool.helpers[0].idle.clear()  # as while it compiles the previous run
        assert pool.submit({"run_id": "b"}, shapes[:2]) == {"shapes": 2, "helpers": 1}
        wait_idle(SimpleNamespace(helpers=pool.helpers[1:]))
        assert [n["n"] for n in pool.helpers[1].answers[-1]["shapes"]] == [0, 1]
    finally:
        pool.close()


@pytest.mark.worker
def test_a_helper_that_died_is_replaced_when_the_pool_starts_again():
    pool = ready_pool(1)
    try:
        first = pool.helpers[0]
        assert pool.submit({"run_id": "a"}, [{"die": True}]) == {"shapes": 1, "helpers": 1}
        first.proc.wait(timeout=SAFETY_S)
        assert pool.submit({"run_id": "b"}, [{"n": 1}]) == {}  # nothing to hand it to
        pool.start()
        assert pool.helpers[0] is not first and pool.helpers[0].alive()
    finally:
        pool.close()
    assert not first.alive()


@pytest.mark.worker
def test_closing_the_pool_leaves_no_helper_behind():
    pool = ready_pool(2)
    pids = [h.proc.pid for h in pool.helpers]
    pool.close()
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)


@pytest.mark.worker
def test_the_end_of_job_sweep_spares_the_helpers_and_what_they_run_and_nothing_else():
    spared = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"])
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + SAFETY_S
        while not processes.descendants(spared.pid):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        grandchild = processes.descendants(spared.pid)[0]
        below = processes.descendants(os.getpid(), spare={spared.pid})
        assert stray.pid in below and spared.pid not in below and grandchild not in below
    finally:
        processes.kill_all([spared.pid, *processes.descendants(spared.pid), stray.pid])
        spared.wait(timeout=10)
        stray.wait(timeout=10)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


def _job_for(ws, name: str):
    from ktui.dispatch.session import Session
    from ktui.protocol.job import Options
    from ktui.workspace.kernels import kernel_at

    return Session(ws).prepare(kernel_at(ws / "kernels" / f"{name}.py"), Options(force_cpu=True, benchmark=False))


def _ask(helper: subprocess.Popen, job, shapes: list[dict]) -> dict:
    import json

    helper.stdin.write(json.dumps({"job": job.to_json(), "shapes": shapes}) + "\n")
    helper.stdin.flush()
    return json.loads(helper.stdout.readline())


@pytest.mark.worker
def test_a_real_helper_calls_the_runs_kernel_on_each_small_shape_and_answers_even_when_the_kernel_raises(tmp_path):
    import json

    from conftest import REPO, make_workspace

    ws = make_workspace(tmp_path / "ws", kernels=["softmax_triton", "add_triton"])
    broken = ws / "kernels" / "add_triton.py"
    broken.write_text(broken.read_text().replace("def custom_kernel(", "def custom_kernel(*_):\n    raise ValueError('no')\n\n\ndef _old(", 1))
    env = {**os.environ, "PYTHONPATH": str(REPO), processes.PARENT_ENV: str(os.getpid())}
    helper = subprocess.Popen([sys.executable, "-m", "ktui.worker.ahead"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert json.loads(helper.stdout.readline())["type"] == "ready"
        # it yields the cores to the worker, whose compile and dumps a save waits for
        assert os.getpriority(os.PRIO_PROCESS, helper.pid) == os.getpriority(os.PRIO_PROCESS, 0) + NICENESS
        shapes = [{"rows": 3, "cols": 7}, {"rows": 16384, "cols": 8192}, {"rows": 5, "cols": 33}]
        softmax = _ask(helper, _job_for(ws, "softmax_triton"), shapes)
        assert (softmax["type"], softmax["compiled"]) == ("done", 2)  # 1 GB of inputs and outputs: the worker's
        raising = _ask(helper, _job_for(ws, "add_triton"), [{"size": 8}])
        assert (raising["type"], raising["compiled"]) == ("done", 0)  # the worker finds and reports it, not the helper
    finally:
        helper.kill()
        helper.wait(timeout=10)


@pytest.mark.worker
def test_a_helper_that_has_just_started_replays_the_sessions_latest_run_at_once():
    """Its first request pays a new process's one-time costs; the run it replays has its
    specialisations built already, so that is paid before the next save needs the helper."""
    pool = AheadPool(1, [sys.executable, "-c", SCRIPTED])
    try:
        # the session's first run: no helper yet, but the pool keeps what the run would have handed out
        assert pool.submit({"run_id": "first"}, [{"n": 1}, {"n": 7}]) == {}
        assert pool.submit({"run_id": "none"}, []) == {}  # a run with nothing to hand out is not a replay
        pool.start()
        deadline = time.monotonic() + SAFETY_S
        while not pool.helpers[0].answers:
            assert time.monotonic() < deadline, "the new helper never replayed the latest run"
            time.sleep(0.01)
        assert pool.helpers[0].answers[0]["shapes"] == [{"n": 1}, {"n": 7}]
        wait_idle(pool)
        assert pool.submit({"run_id": "second"}, [{"n": 9}]) == {"shapes": 1, "helpers": 1}
    finally:
        pool.close()
