"""The run queue driven by a scripted runner: no worker, no kernel code, real sessions and SQLite."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import make_workspace
from waits import SAFETY_S

from ktui.dispatch.queue import NoVerdict, RunQueue
from ktui.dispatch.scripted import HANG, Script, ScriptedRunner, Step
from ktui.dispatch.session import Session
from ktui.protocol.events import CANCELLED, CRASHED, PASSED, RunFinished, RunStarted
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
        verdicts = []
        with pytest.raises(NoVerdict, match=r"no verdict for softmax_triton\.py: stopped by SIGTERM"):
            verdicts.extend((k.id, f.verdict, f.message) for k, f in batch)
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
    from ktui.dispatch.worker_protocol import WorkerStartError

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


def _callers(queue: RunQueue, kernel, count: int, before=lambda i: None) -> tuple[list[threading.Thread], list]:
    """``count`` callers of ``kernel``, started one after another (``before(i)`` first): their threads
    and what each got, ``(i, verdict, content hash judged)`` or ``(i, NoVerdict)``."""
    got: list = []

    def call(i: int) -> None:
        try:
            got.extend((i, f.verdict, _hash_of(queue, f.run_id)) for _, f in queue.batch([kernel], OPTIONS))
        except NoVerdict as exc:
            got.append((i, exc))

    def asked() -> int:
        with queue._cond:
            entries = [*queue._queue, *(cur.entry for _, cur in queue._running())]
            return sum(len(e.batches) for e in entries)

    threads = []
    for i in range(count):
        before(i)
        threads.append(threading.Thread(target=call, args=(i,)))
        threads[-1].start()
        _wait(lambda i=i: asked() + len(got) > i)  # placed in the queue before the file changes again
    return threads, got


def _hash_of(queue: RunQueue, run_id: str) -> str:
    return next(e.content_hash for e in queue.listener.items if isinstance(e, RunStarted) and e.run_id == run_id)


def test_callers_asking_for_one_kernel_while_it_runs_each_get_a_verdict_none_replaced(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    source = kernel.path.read_text()
    gate = threading.Event()
    runner = ScriptedRunner(lambda job: Script((Step("correctness", until=gate),)))
    heard = Heard()
    queue = _queue(root, runner, heard)
    try:
        threads, got = _callers(queue, kernel, 4, before=lambda i: kernel.path.write_text(source + f"# {i}\n"))
        _wait(lambda: len(queue._queue) == 3)  # one runs (held at its gate), three wait: none replaced another
        gate.set()
        for thread in threads:
            thread.join(SAFETY_S)
    finally:
        queue.close()
    assert sorted(i for i, *_ in got) == [0, 1, 2, 3], got
    assert all(verdict == PASSED for _, verdict, _ in got), got
    assert len(runner.played) == 4, "four contents asked for: four runs"


def test_callers_asking_for_the_same_content_share_one_run_and_each_gets_its_verdict(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    gate = threading.Event()
    runner = ScriptedRunner(lambda job: Script((Step("correctness", until=gate),)))
    queue = _queue(root, runner, Heard())
    try:
        threads, got = _callers(queue, kernel, 3)
        _wait(lambda: len(queue._queue) == 1 and len(queue._queue[0].batches) == 2)  # the second and third share
        gate.set()
        for thread in threads:
            thread.join(SAFETY_S)
    finally:
        queue.close()
    assert sorted(i for i, *_ in got) == [0, 1, 2] and {v for _, v, _ in got} == {PASSED}, got
    assert len(runner.played) == 2, "the first run, then one run shared by the two callers of the same content"
    assert got[1][2] == got[2][2], "both were told the one version judged"


def test_a_save_during_a_callers_run_leaves_that_run_to_its_verdict_and_runs_the_newest_content_next(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    gate = threading.Event()
    runner = ScriptedRunner(lambda job: Script((Step("correctness", until=gate),)))
    heard = Heard()
    queue = _queue(root, runner, heard)
    try:
        threads, got = _callers(queue, kernel, 1)
        _wait(lambda: runner.played)
        kernel.path.write_text(kernel.path.read_text() + "# saved\n")
        queue.submit(kernel, restart=True)  # the watch's save
        gate.set()
        for thread in threads:
            thread.join(SAFETY_S)
        heard.wait_finished(2)
    finally:
        queue.close()
    assert [v for _, v, _ in got] == [PASSED], "the caller's run was not cancelled by the save"
    assert [f.verdict for f in heard.finished()] == [PASSED, PASSED]


def test_a_caller_whose_kernel_is_removed_before_its_run_is_told_it_has_no_verdict(tmp_path):
    root = _workspace(tmp_path)
    kernels = _kernels(root)
    runner = ScriptedRunner(lambda job: Script((Step("correctness", HANG if job.kernel_id == "softmax_triton" else 0),)))
    queue = _queue(root, runner, Heard())
    got: list = []

    def call(name: str) -> None:
        try:
            got.extend(f.verdict for _, f in queue.batch([kernels[name]], OPTIONS))
        except NoVerdict as exc:
            got.append(str(exc))

    callers = [threading.Thread(target=call, args=(name,)) for name in ("softmax_triton", "add_triton")]
    try:
        callers[0].start()
        _wait(lambda: runner.played)
        callers[1].start()
        _wait(lambda: queue._queue)
        queue.forget(kernels["add_triton"].path)
        callers[1].join(SAFETY_S)
    finally:
        queue.close()
        callers[0].join(SAFETY_S)
    assert got[0] == "no verdict for add_triton.py: its file was removed before its run", got
