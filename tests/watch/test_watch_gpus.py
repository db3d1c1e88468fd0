"""``ktui watch`` on several GPUs: one scheduler thread and warm worker per device.

Two ``--gpus`` entries with a CPU-tier worker behind each stand for two GPUs (this machine has
none): real files, real saves, real worker processes and kernels.
"""

from __future__ import annotations

import pytest
from conftest import FIXTURES, REPO, make_workspace
from test_watch_loop import Collector, save_atomically

from ktui.dispatch.gpus import Device
from ktui.dispatch.pool import DevicePool
from ktui.dispatch.runner import WorkerConfig
from ktui.protocol.events import RunFinished, RungFinished, RungStarted, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.notices import QueueChanged
from ktui.watch.loop import WatchLoop, WatchSettings
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import content_hash

pytestmark = pytest.mark.worker

ADD = (REPO / "kernels" / "add_triton.py").read_text()
HANG = (FIXTURES / "kernels" / "hang.py").read_text()
TWO = [Device("0"), Device("1")]


# an add whose run waits until kernels/release exists: in flight until the test lets it go
HELD = (FIXTURES / "kernels" / "held.py").read_text()


def _loop(ws, got, pool=None, **options):
    pool = pool or DevicePool(TWO, WorkerConfig(force_cpu=True))
    return WatchLoop(Workspace.at(ws), Options(seed=0, benchmark=False, **options), got,
                     WatchSettings(debounce_s=0.05, audit=False), runners=pool.runners)


def _one_run_per_gpu_at_a_time(items) -> set[str]:
    """Every GPU's runs one after another (a run_started only once its previous run finished);
    the GPUs that ran something."""
    gpu_of, open_on = {}, {}
    for item in items:
        if isinstance(item, RunStarted):
            assert not open_on.get(item.gpu), f"two runs at once on GPU {item.gpu}"
            gpu_of[item.run_id] = item.gpu
            open_on[item.gpu] = True
        elif isinstance(item, RunFinished) and item.run_id in gpu_of:
            open_on[gpu_of[item.run_id]] = False
    return set(gpu_of.values())


def test_three_kernels_share_two_gpus_one_run_per_gpu_at_a_time(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    for name in ("a", "b", "c"):
        (ws / "kernels" / f"add_{name}.py").write_text(ADD)
    got = Collector()
    loop = _loop(ws, got)
    loop.start()  # catches up: all three are submitted at once
    try:
        for name in ("a", "b", "c"):
            done = got.wait_for(lambda e, n=name: isinstance(e, RunFinished) and e.run_id in {
                s.run_id for s in got.of(RunStarted) if s.kernel == f"add_{n}"}, timeout=300)
            assert done.verdict == "passed"
        assert _one_run_per_gpu_at_a_time(got.items) == {"0", "1"}
        # the dashboard is told about both runs in flight at once
        assert any(q.running and q.also_running for q in got.of(QueueChanged))
    finally:
        loop.close()


def test_a_save_cancels_only_its_own_kernels_run_and_the_other_gpu_runs_on(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    edited, other = ws / "kernels" / "add_edit.py", ws / "kernels" / "add_other.py"
    edited.write_text(HANG)
    other.write_text(HANG)
    got = Collector()
    loop = _loop(ws, got, timeouts={"compile": 300})
    loop.start()
    try:
        hanging = {got.wait_for(lambda e, k=k: isinstance(e, RunStarted) and e.kernel == k).kernel: None
                   for k in ("add_edit", "add_other")}
        starts = {s.kernel: s for s in got.of(RunStarted)}
        for kernel in hanging:  # both workers have their job: a cancel now kills a real run
            got.wait_for(lambda e, k=kernel: isinstance(e, RungStarted) and e.run_id == starts[k].run_id)
        save_atomically(edited, ADD)
        cancelled = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == starts["add_edit"].run_id)
        assert cancelled.verdict == "cancelled"
        fresh = got.wait_for(lambda e: isinstance(e, RunStarted) and e.kernel == "add_edit"
                             and e.run_id != starts["add_edit"].run_id)
        assert fresh.content_hash == content_hash(ADD.encode())
        assert fresh.gpu == starts["add_edit"].gpu  # the other GPU is still busy with add_other
        done = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == fresh.run_id, timeout=300)
        assert done.verdict == "passed"
        # the other kernel's run was never touched: still in flight on its GPU
        assert not [e for e in got.of(RunFinished) if e.run_id == starts["add_other"].run_id]
        assert _one_run_per_gpu_at_a_time(got.items) == {"0", "1"}
    finally:
        loop.close()


def test_a_worker_killed_on_one_gpu_ends_only_its_run_and_the_other_gpu_runs_on_to_its_verdict(tmp_path):
    import os
    import signal

    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "add_hang.py").write_text(HANG)
    (ws / "kernels" / "add_slow.py").write_text(HELD)
    got = Collector()
    pool = DevicePool(TWO, WorkerConfig(force_cpu=True))
    loop = _loop(ws, got, pool=pool, timeouts={"compile": 300})
    loop.start()
    try:
        starts = {k: got.wait_for(lambda e, k=k: isinstance(e, RunStarted) and e.kernel == k)
                  for k in ("add_hang", "add_slow")}
        for start in starts.values():
            got.wait_for(lambda e, s=start: isinstance(e, RungStarted) and e.run_id == s.run_id and e.rung == "compile")
        victim = pool.runners[[d.index for d in TWO].index(starts["add_hang"].gpu)]
        os.kill(victim._worker.proc.pid, signal.SIGKILL)
        crashed = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == starts["add_hang"].run_id)
        assert crashed.verdict == "crashed" and "SIGKILL" in crashed.message
        (ws / "kernels" / "release").touch()
        done = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == starts["add_slow"].run_id, timeout=300)
        assert done.verdict == "passed", [(e.rung, e.status, e.message) for e in got.items
                                          if isinstance(e, RungFinished) and e.run_id == done.run_id and e.status != "ok"]
        assert got.items.index(done) > got.items.index(crashed)  # it was still running when the other died
        assert starts["add_slow"].gpu != starts["add_hang"].gpu
    finally:
        loop.close()
