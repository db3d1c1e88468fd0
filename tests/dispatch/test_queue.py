"""The run queue driven by a scripted runner: no worker, no kernel code, real sessions and SQLite."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import make_workspace
from waits import SAFETY_S

from ktui.dispatch.queue import RunQueue
from ktui.dispatch.scripted import HANG, Script, ScriptedRunner, Step
from ktui.dispatch.session import Session
from ktui.protocol.events import CANCELLED, CRASHED, PASSED, RunFinished, RungStarted
from ktui.protocol.job import Options
from ktui.workspace.kernels import discover

pytestmark = pytest.mark.unit

OPTIONS = Options(force_cpu=True, benchmark=False)


def _workspace(tmp_path: Path, names=("add_triton", "softmax_triton")) -> Path:
    return make_workspace(tmp_path, kernels=list(names))


def _kernels(root: Path):
    return {k.id: k for k in discover([root / "kernels"])}


class Heard:
    """The queue's listener: every event and notice, and a way to wait for a verdict."""

    def __init__(self) -> None:
        self.items: list = []
        self._cond = threading.Condition()

    def __call__(self, item) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def finished(self) -> list[RunFinished]:
        with self._cond:
            return [i for i in self.items if isinstance(i, RunFinished)]

    def wait_finished(self, count: int, timeout: float = SAFETY_S) -> list[RunFinished]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len([i for i in self.items if isinstance(i, RunFinished)]) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {len(self.finished())} of {count} runs finished"
                self._cond.wait(left)
        return self.finished()


def _queue(root: Path, runner: ScriptedRunner, heard: Heard, **kw) -> RunQueue:
    queue = RunQueue(Session(root, runner=runner), OPTIONS, heard, warm_up=False, **kw)
    queue.start()
    return queue


def _wait(condition, timeout: float = SAFETY_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_a_save_during_a_run_cancels_it_and_the_newest_content_runs_next(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    first = threading.Event()

    def script(job):
        if not first.is_set():
            first.set()
            return Script((Step("correctness", HANG),))
        return Script()

    runner, heard = ScriptedRunner(script), Heard()
    queue = _queue(root, runner, heard)
    try:
        queue.submit(kernel)
        _wait(lambda: runner.played)
        kernel.path.write_text(kernel.path.read_text() + "\n# saved again\n")
        queue.submit(kernel, restart=True)
        stale, fresh = heard.wait_finished(2)
    finally:
        queue.close()
    assert (stale.verdict, fresh.verdict) == (CANCELLED, PASSED)
    versions = [s.version for s in heard.items if type(s).__name__ == "RunStarted"]
    assert versions == [1, 2]


def test_background_work_is_pre_empted_by_a_submit_and_runs_again_after(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    starts, outcomes = [], []

    def audit(cancel: threading.Event) -> bool:  # the first lasts until the submit pre-empts it
        starts.append(time.monotonic())
        done = not cancel.wait(SAFETY_S if len(starts) == 1 else 0.0)
        outcomes.append(done)
        return done

    runner, heard = ScriptedRunner(), Heard()
    queue = _queue(root, runner, heard)
    try:
        queue.submit_background(root / "references" / "add.py", "auditing add", audit)
        _wait(lambda: starts)
        queue.submit(kernel)
        heard.wait_finished(1)
        _wait(lambda: len(outcomes) == 2)
    finally:
        queue.close()
    assert outcomes == [False, True]
    run = runner.played[0]
    assert starts[1] >= run.ended, "the audit started again only once the run had ended"


def test_a_batch_yields_each_verdict_and_stopping_early_runs_nothing_more(tmp_path):
    root = _workspace(tmp_path, ["add_triton", "rmsnorm_triton", "softmax_triton"])
    kernels = sorted(_kernels(root).values(), key=lambda k: k.id)
    first = kernels[0].id

    def script(job):  # the first passes; any other hangs until it is cancelled
        return Script((Step("correctness", 0.05),)) if job.kernel_id == first else Script((Step("correctness", HANG),))

    runner, heard = ScriptedRunner(script), Heard()
    queue = _queue(root, runner, heard)
    try:
        batch = queue.batch(kernels, OPTIONS)
        kernel, finished = next(batch)
        batch.close()
        _wait(lambda: queue.idle)
        time.sleep(0.2)
    finally:
        queue.close()
    assert (kernel.id, finished.verdict) == (first, PASSED)
    # The queue may have handed the second kernel to the runner before the close arrived; then it
    # was cancelled. The third never started.
    played = [(p.kernel, p.verdict) for p in runner.played]
    assert played[0] == (first, PASSED)
    assert played[1:] in ([], [(kernels[1].id, CANCELLED)]), played
    assert queue.idle


def test_a_batch_runs_with_its_own_options_not_the_queues(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    runner, heard = ScriptedRunner(), Heard()
    queue = _queue(root, runner, heard)
    strict = Options(force_cpu=True, benchmark=False, strict=True)
    try:
        [(_, finished)] = list(queue.batch(list(_kernels(root).values()), strict))
    finally:
        queue.close()
    assert finished.verdict == PASSED and runner.played[0].options.strict


def test_cancelling_a_batch_in_flight_ends_its_run_cancelled_with_the_reason(tmp_path):
    root = _workspace(tmp_path)
    runner, heard = ScriptedRunner(lambda job: Script((Step("correctness", HANG),))), Heard()
    queue = _queue(root, runner, heard)
    try:
        batch = queue.batch(sorted(_kernels(root).values(), key=lambda k: k.id), OPTIONS)
        threading.Timer(0.2, queue.cancel, args=("stopped by SIGTERM",)).start()
        verdicts = [(k.id, f.verdict, f.message) for k, f in batch]
    finally:
        queue.close()
    assert verdicts == [("add_triton", CANCELLED, "stopped by SIGTERM")]
    assert len(runner.played) == 1, "the second kernel never reached the worker"


def test_a_worker_dying_mid_run_ends_that_run_crashed_and_the_next_gets_a_new_worker(tmp_path):
    root = _workspace(tmp_path)
    crash = {"add_triton"}
    runner = ScriptedRunner(lambda job: Script(verdict=CRASHED, message="worker died: SIGKILL")
                            if job.kernel_id in crash else Script())
    queue = _queue(root, runner, Heard())
    try:
        verdicts = {k.id: f.verdict for k, f in queue.batch(sorted(_kernels(root).values(), key=lambda k: k.id), OPTIONS)}
    finally:
        queue.close()
    assert verdicts == {"add_triton": CRASHED, "softmax_triton": PASSED}
    assert runner.played[0].worker != runner.played[1].worker


def test_a_runner_that_cannot_start_is_raised_to_the_batch_caller(tmp_path):
    from ktui.dispatch.runner import WorkerStartError

    root = _workspace(tmp_path, ["add_triton"])

    class NoWorker(ScriptedRunner):
        def run(self, job):
            raise WorkerStartError("the worker would not start: no python")
            yield

    queue = _queue(root, NoWorker(), Heard())
    try:
        with pytest.raises(WorkerStartError, match="would not start"):
            list(queue.batch(list(_kernels(root).values()), OPTIONS))
    finally:
        queue.close()


def test_runs_of_two_batches_on_one_runner_never_overlap(tmp_path):
    root = _workspace(tmp_path)
    kernels = sorted(_kernels(root).values(), key=lambda k: k.id)
    runner = ScriptedRunner(lambda job: Script((Step("correctness", 0.05),)))
    queue = _queue(root, runner, Heard())
    results: list = []
    try:
        callers = [threading.Thread(target=lambda k=k: results.extend(queue.batch([k], OPTIONS))) for k in kernels]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join(SAFETY_S)
    finally:
        queue.close()
    assert len(results) == 2
    first, second = sorted(runner.played, key=lambda p: p.started)
    assert first.ended <= second.started


def test_cancelling_one_callers_batch_leaves_another_callers_run_alone(tmp_path):
    from ktui.dispatch.queue import Batch

    root = _workspace(tmp_path)
    kernels = _kernels(root)
    runner = ScriptedRunner(lambda job: Script((Step("correctness", HANG if job.kernel_id == "add_triton" else 0.05),)))
    queue = _queue(root, runner, Heard())
    mine, ours, theirs = Batch(), [], []
    try:
        us = threading.Thread(target=lambda: ours.extend(queue.batch([kernels["add_triton"]], OPTIONS, handle=mine)))
        them = threading.Thread(target=lambda: theirs.extend(queue.batch([kernels["softmax_triton"]], OPTIONS)))
        us.start()
        _wait(lambda: runner.played)
        them.start()  # queued behind our hanging run
        time.sleep(0.1)
        queue.cancel("cancelled by the client", mine)
        us.join(SAFETY_S)
        them.join(SAFETY_S)
    finally:
        queue.close()
    [(_, cancelled)] = ours
    assert cancelled.verdict == CANCELLED
    assert [(k.id, f.verdict) for k, f in theirs] == [("softmax_triton", PASSED)]


@pytest.mark.parametrize("confined", [False, True])
def test_only_an_unconfined_run_in_flight_could_have_written_a_file_and_a_save_after_it_ended_never(tmp_path, confined):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    runner, heard = ScriptedRunner(lambda job: Script((Step("correctness", 0.3),)), confined=confined), Heard()
    in_flight: list[tuple[float, bool]] = []

    def hear(item) -> None:  # in the queue's thread: at its rung's start the run is surely in flight
        heard(item)
        if isinstance(item, RungStarted):
            during = time.time()
            in_flight.append((during, queue.could_have_written(kernel.path, during)))

    queue = _queue(root, runner, hear)
    try:
        before = time.time()
        time.sleep(0.1)  # a wall clock's step: "before" is earlier than anything the run does
        queue.submit(kernel)
        heard.wait_finished(1)
        after = time.time()
    finally:
        queue.close()
    [(during, then)] = in_flight
    assert then is not confined  # in flight
    assert queue.could_have_written(kernel.path, during) is not confined  # written while it ran
    assert not queue.could_have_written(kernel.path, before)  # before the run: someone's save
    assert not queue.could_have_written(kernel.path, after)  # the moment after its verdict: someone's save
    assert not queue.could_have_written(root / "kernels" / "other.py", during)


def test_a_file_saved_by_whoever_hears_the_verdict_is_never_the_unconfined_runs_own(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    runner = ScriptedRunner(lambda job: Script((Step("correctness", 0.05),)), confined=False)
    echoes: list[bool] = []
    queue: RunQueue | None = None

    def agent(item) -> None:  # saves its next version the moment it reads the verdict, in the queue's thread
        if isinstance(item, RunFinished):
            kernel.path.write_text(kernel.path.read_text() + "\n# next version\n")
            echoes.append(queue.could_have_written(kernel.path, kernel.path.stat().st_mtime))

    queue = _queue(root, runner, agent)
    try:
        for run in range(1, 4):
            queue.submit(kernel)
            _wait(lambda run=run: len(echoes) == run)
    finally:
        queue.close()
    assert echoes == [False, False, False]
