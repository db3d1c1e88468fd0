"""Several GPUs of one host: one warm worker per device, different kernels in parallel.

The devices here are two ``--gpus`` entries with a CPU-tier worker behind each (this machine has
no GPU): real worker processes running real kernels, pinned as they would be to real GPUs.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from conftest import make_workspace

from ktui.dispatch.gpus import Device
from ktui.dispatch.pool import DevicePool
from ktui.dispatch.queue import RunQueue
from ktui.dispatch.runner import WorkerConfig
from ktui.dispatch.session import Session
from ktui.protocol.events import RunFinished, RungStarted, RunStarted
from ktui.protocol.job import Options
from ktui.workspace.kernels import kernel_at

pytestmark = pytest.mark.worker

TWO = [Device("0", "GPU-aaaa"), Device("1", "GPU-bbbb")]


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["held", "crash_segfault"])


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


def _summary(events) -> tuple[str, str, str, float, float]:
    start = next(e for e in events if isinstance(e, RunStarted))
    end = next(e for e in events if isinstance(e, RunFinished))
    return start.kernel, start.gpu, end.verdict, start.time, end.time


def _batch(ws: Path, pool: DevicePool, names: list[str], options: Options,
           each=lambda kernel: None) -> list[tuple[str, str, str, float, float]]:
    """The kernels run through the run queue on the pool's GPUs, one thread each, as ``ktui run
    --gpus`` runs them: per run, in the order they finish, its kernel, GPU, verdict, start and end;
    ``each`` is told each kernel as its verdict comes."""
    starts: dict[str, RunStarted] = {}
    queue = RunQueue(Session(ws, runner=pool.runners[0]), options, lambda item: None, warm_up=False,
                     runners=pool.runners, owns_runners=False)  # the pool closes its own runners
    queue.start()
    try:
        heard = lambda event: starts.setdefault(event.run_id, event) if isinstance(event, RunStarted) else None  # noqa: E731
        kernels = [kernel_at(ws / "kernels" / f"{name}.py") for name in names]
        ends = []
        for k, end in queue.batch(kernels, options, heard=heard):
            each(k)
            ends.append((k.id, starts[end.run_id].gpu, end.verdict, starts[end.run_id].time, end.time))
        return ends
    finally:
        queue.close()


def test_a_kernel_held_on_one_gpu_does_not_hold_up_the_other_and_results_come_in_finish_order(ws, pool):
    # held.py waits until kernels/release exists: it is let go only once add_triton's verdict is in
    release = lambda kernel: (ws / "kernels" / "release").touch()  # noqa: E731
    (first, first_gpu, first_verdict, *_), (second, second_gpu, second_verdict, *_) = _batch(
        ws, pool, ["held", "add_triton"], Options(seed=1, benchmark=False), each=release)  # held is handed out first
    # add_triton ran beside it, on the other GPU, and came back first
    assert (first, first_verdict) == ("add_triton", "passed")
    assert (second, second_verdict) == ("held", "passed")
    assert {first_gpu, second_gpu} == {"0", "1"}


def test_each_worker_sees_only_its_own_gpu(pool):
    for device, runner in zip(TWO, pool.runners):
        runner.describe()  # starts the worker
        environ = Path(f"/proc/{runner._worker.proc.pid}/environ").read_bytes().split(b"\0")
        assert f"CUDA_VISIBLE_DEVICES={device.index}".encode() in environ


def test_a_worker_crash_on_one_gpu_leaves_the_run_on_the_other_gpu_finishing(ws, pool):
    options = Options(seed=2, benchmark=False)
    # held.py waits until kernels/release exists: in flight until the crash is over
    slow_job, crash_job, add_job = _jobs(ws, ["held", "crash_segfault", "add_triton"], options)
    # ``pool.run`` takes its jobs up front; to queue the crash only once the slow run is climbing,
    # the pool's runners are driven one thread per GPU, as ``ktui watch``'s scheduler drives them
    steady, crashing = pool.runners
    slow_events: list = []
    climbing = threading.Event()

    def run_slow():
        for event in steady.run(slow_job):
            slow_events.append(event)
            if isinstance(event, RungStarted):
                climbing.set()
        climbing.set()  # never hang the test: the assertions below say what went wrong

    crashing.describe()  # its worker warm: the crash comes within seconds of being queued
    thread = threading.Thread(target=run_slow, daemon=True)
    thread.start()
    # the crash is queued only once the slow run is surely in flight on the other GPU
    assert climbing.wait(timeout=300) and any(isinstance(e, RungStarted) for e in slow_events), slow_events
    crash = _summary(list(crashing.run(crash_job)))
    (ws / "kernels" / "release").touch()
    add = _summary(list(crashing.run(add_job)))
    thread.join(timeout=300)
    slow = _summary(slow_events)
    assert crash[2] == "crashed"
    # the run in flight on the other GPU when the worker died went on and passed
    assert slow[3] < crash[4] < slow[4] and slow[1] != crash[1] and slow[2] == "passed", (slow, crash)
    # and the GPU whose worker died took work again, on a fresh worker
    assert add[1] == crash[1] and add[2] == "passed"


def test_two_runs_of_one_kernel_version_never_overlap_they_share_a_run_folder(ws, pool):
    options = Options(seed=4, benchmark=False)
    jobs = _jobs(ws, ["add_triton", "add_triton"], options)
    assert jobs[0].run_dir == jobs[1].run_dir
    first, second = _batch(ws, pool, ["add_triton", "add_triton"], options)
    assert first[2] == second[2] == "passed"
    assert second[3] >= first[4]  # the second started once the first had finished


def test_every_run_is_recorded_with_the_gpu_index_and_uuid_that_ran_it(ws, pool):
    from ktui.history.store import Store

    _batch(ws, pool, ["add_triton", "crash_segfault"], Options(seed=3, benchmark=False))
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
