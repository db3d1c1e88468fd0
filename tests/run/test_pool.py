"""Several GPUs of one host: one warm worker per device, different kernels in parallel.

The devices here are two ``--gpus`` entries with a CPU-tier worker behind each (this machine has
no GPU): real worker processes running real kernels, pinned as they would be to real GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import make_workspace

from ktui.protocol.events import RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.run.devices import Device
from ktui.run.pool import DevicePool
from ktui.run.runner import WorkerConfig
from ktui.run.session import Session
from ktui.workspace.kernels import kernel_at

TWO = [Device("0", "GPU-aaaa"), Device("1", "GPU-bbbb")]


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang", "crash_segfault"])


@pytest.fixture
def pool():
    pool = DevicePool(TWO, WorkerConfig(force_cpu=True))
    yield pool
    pool.close()


def _jobs(ws: Path, names: list[str], options: Options):
    session = Session(ws)
    try:
        return [session.prepare(kernel_at(ws / "kernels" / f"{name}.py"), options) for name in names]
    finally:
        session.close()


def _runs(stream) -> list[list]:
    """The streamed ``(job, event)`` pairs as each run's events, in the order the runs finish."""
    open_runs: dict[str, list] = {}
    finished = []
    for job, event in stream:
        open_runs.setdefault(job.run_id, []).append(event)
        if isinstance(event, RunFinished):
            finished.append(open_runs.pop(job.run_id))
    assert not open_runs, "a run's events stopped before its run_finished"
    return finished


def _summary(events) -> tuple[str, str, str, float, float]:
    start = next(e for e in events if isinstance(e, RunStarted))
    end = next(e for e in events if isinstance(e, RunFinished))
    return start.kernel, start.gpu, end.verdict, start.time, end.time


def test_a_kernel_hanging_on_one_gpu_does_not_hold_up_the_other_and_results_come_in_finish_order(ws, pool):
    options = Options(seed=1, benchmark=False, timeouts={"compile": 45})
    jobs = _jobs(ws, ["hang", "add_triton"], options)  # the hang is handed out first
    (first, first_gpu, first_verdict, *_), (second, second_gpu, second_verdict, *_) = (
        _summary(events) for events in _runs(pool.run(jobs)))
    # add_triton ran beside the hang, on the other GPU, and came back first
    assert (first, first_verdict) == ("add_triton", "passed")
    assert (second, second_verdict) == ("hang", "timed_out")
    assert {first_gpu, second_gpu} == {"0", "1"}


def test_each_worker_sees_only_its_own_gpu(pool):
    for device, runner in zip(TWO, pool.runners):
        runner.describe()  # starts the worker
        environ = Path(f"/proc/{runner._worker.proc.pid}/environ").read_bytes().split(b"\0")
        assert f"CUDA_VISIBLE_DEVICES={device.index}".encode() in environ


def test_a_worker_crash_on_one_gpu_leaves_the_run_on_the_other_gpu_finishing(ws, pool):
    options = Options(seed=2, benchmark=False)
    jobs = _jobs(ws, ["crash_segfault", "add_triton", "add_triton"], options)
    results = [_summary(events) for events in _runs(pool.run(jobs))]
    crash = results[0]
    assert crash[:1] + crash[2:3] == ("crash_segfault", "crashed")
    # the run that was in flight on the other GPU when the worker died went on and passed
    beside = [r for r in results[1:] if r[3] < crash[4] < r[4]]
    assert beside and all(r[1] != crash[1] and r[2] == "passed" for r in beside)
    # and the GPU whose worker died took work again (a fresh worker): every add passed
    assert [r[2] for r in results[1:]] == ["passed", "passed"]


def test_every_run_is_recorded_with_the_gpu_index_and_uuid_that_ran_it(ws, pool):
    from ktui.history.store import Store
    from ktui.run.ray_pool import evaluate

    kernels = [kernel_at(ws / "kernels" / "add_triton.py"), kernel_at(ws / "kernels" / "crash_segfault.py")]
    evaluate(pool, kernels, Options(seed=3, benchmark=False))
    store = Store.of(ws / ".ktui")
    try:
        recorded = {(r.kernel, r.gpu, r.gpu_uuid) for r in store.runs()}
    finally:
        store.close()
    assert {gpu for _, gpu, _ in recorded} == {"0", "1"}  # both GPUs took one
    assert all(uuid == {"0": "GPU-aaaa", "1": "GPU-bbbb"}[gpu] for _, gpu, uuid in recorded)


def test_a_cancel_naming_a_finished_run_leaves_the_next_run_on_that_gpu_alone(ws, pool):
    from ktui.protocol.events import RungStarted

    runner = pool.runners[0]
    earlier, later, last = _jobs(ws, ["add_triton", "add_triton", "add_triton"], Options(seed=4, benchmark=False))
    assert [e.verdict for e in runner.run(earlier) if isinstance(e, RunFinished)] == ["passed"]

    def run_cancelling(job, run_id):
        verdicts = []
        for event in runner.run(job):
            if isinstance(event, RungStarted) and event.rung == "compile":
                runner.cancel(run_id=run_id)  # arrives while ``job`` is in flight
            if isinstance(event, RunFinished):
                verdicts.append(event.verdict)
        return verdicts

    assert run_cancelling(later, earlier.run_id) == ["passed"]  # a late cancel of the earlier run
    assert run_cancelling(last, last.run_id) == ["cancelled"]  # the run it names is cancelled
