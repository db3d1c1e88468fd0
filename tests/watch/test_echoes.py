"""A kernel's own saves re-run it a few times in a row at most; a save of the user's runs it again."""

import time
from pathlib import Path

import pytest
from conftest import make_workspace

from ktui.dispatch.queue import RunQueue
from ktui.dispatch.scripted import Script, ScriptedRunner, Step
from ktui.dispatch.session import Session
from ktui.protocol.events import RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.watch.echoes import LIMIT, Echoes, UnconfinedRuns
from ktui.workspace.kernels import kernel_for

pytestmark = pytest.mark.unit

ROOT = Path("/ws")
KERNEL = ROOT / "kernels" / "add.py"
REFERENCE = ROOT / "references" / "add.py"


def test_echoes_rerun_a_kernel_limit_times_then_stop_it_saying_why_once():
    echoes = Echoes(ROOT)
    assert [echoes.admit("add", KERNEL, REFERENCE, echo=True) for _ in range(LIMIT)] == [(True, None)] * LIMIT
    rerun, stopped = echoes.admit("add", KERNEL, REFERENCE, echo=True)
    assert not rerun
    assert stopped.kernel == "add" and stopped.path == str(REFERENCE)
    assert stopped.message == (f"kernel add kept rewriting references/add.py during its own runs ({LIMIT} re-runs in "
                               "a row caused by no save of yours): stopped re-running it; save it to run again")
    assert echoes.admit("add", KERNEL, KERNEL, echo=True) == (False, None)  # said once


def test_a_save_of_the_users_reruns_a_stopped_kernel_and_starts_its_count_again():
    echoes = Echoes(ROOT)
    for _ in range(LIMIT + 1):
        echoes.admit("add", KERNEL, KERNEL, echo=True)
    assert echoes.admit("add", KERNEL, KERNEL, echo=False) == (True, None)
    assert [echoes.admit("add", KERNEL, KERNEL, echo=True)[0] for _ in range(LIMIT + 1)] == [True] * LIMIT + [False]


def test_a_rerun_asked_for_starts_the_count_again_and_other_kernels_are_counted_apart():
    echoes = Echoes(ROOT)
    other = ROOT / "kernels" / "other.py"
    for _ in range(LIMIT):
        echoes.admit("add", KERNEL, KERNEL, echo=True)
    assert echoes.admit("other", other, other, echo=True) == (True, None)
    echoes.forget(KERNEL)
    assert [echoes.admit("add", KERNEL, KERNEL, echo=True)[0] for _ in range(LIMIT)] == [True] * LIMIT


@pytest.mark.parametrize("confined", [False, True])
def test_only_an_unconfined_run_in_flight_could_have_written_a_file_and_a_save_after_it_ended_never(tmp_path, confined):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    runner, heard = ScriptedRunner(lambda job: Script((Step("correctness", 0.3),)), confined=confined), Heard()
    queue = _queue(root, runner, heard)
    runs = UnconfinedRuns()
    queue.follow(runs, first=True)
    try:
        before = time.time()
        time.sleep(0.1)
        queue.submit(kernel)
        _wait(lambda: any(isinstance(i, RunStarted) for i in list(heard)))  # the queue read the run's start
        during = time.time()
        assert runs.could_have_written(kernel.path, during) is not confined  # in flight
        heard.wait_finished(1)
        after = time.time()
    finally:
        queue.close()
    assert runs.could_have_written(kernel.path, during) is not confined  # written while it ran
    assert not runs.could_have_written(kernel.path, before)  # before the run: someone's save
    assert not runs.could_have_written(kernel.path, after)  # the moment after its verdict: someone's save
    assert not runs.could_have_written(root / "kernels" / "other.py", during)


def test_a_file_saved_by_whoever_hears_the_verdict_is_never_the_unconfined_runs_own(tmp_path):
    root = _workspace(tmp_path, ["add_triton"])
    kernel = _kernels(root)["add_triton"]
    runner = ScriptedRunner(lambda job: Script((Step("correctness", 0.05),)), confined=False)
    echoes: list[bool] = []
    runs: UnconfinedRuns | None = None

    def agent(item) -> None:  # saves its next version the moment it reads the verdict, in the queue's thread
        if isinstance(item, RunFinished):
            kernel.path.write_text(kernel.path.read_text() + "\n# next version\n")
            echoes.append(runs.could_have_written(kernel.path, kernel.path.stat().st_mtime))

    runs = UnconfinedRuns()
    queue = _queue(root, runner, agent)
    queue.follow(runs, first=True)
    try:
        for run in range(1, 4):
            queue.submit(kernel)
            _wait(lambda run=run: len(echoes) == run)
    finally:
        queue.close()
    assert echoes == [False, False, False]


class Heard(list):
    """The queue's listener: every event and notice."""

    def __call__(self, item) -> None:
        self.append(item)

    def wait_finished(self, count: int) -> None:
        _wait(lambda: sum(isinstance(i, RunFinished) for i in list(self)) >= count)


def _workspace(tmp_path: Path, names) -> Path:
    return make_workspace(tmp_path, kernels=list(names))


def _kernels(root: Path):
    return {"add_triton": kernel_for(root / "kernels" / "add_triton.py")}


def _queue(root: Path, runner: ScriptedRunner, listener) -> RunQueue:
    queue = RunQueue(Session(root, runner=runner), Options(force_cpu=True, benchmark=False), listener, warm_up=False)
    queue.start()
    return queue


def _wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)
