"""A watch owns its workspace's GPUs: another caller's kernels run in its queue and its listener
(the dashboard, headless watch) sees those runs (a scripted runner plays them)."""

from __future__ import annotations

import pytest
from conftest import make_workspace
from test_watch_loop import Collector

from ktui.dispatch.owner import OwnerLink, Ownership
from ktui.dispatch.placement import Placement
from ktui.dispatch.scripted import Script, ScriptedRunner, Step
from ktui.protocol.events import PASSED, RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.notices import QueueChanged
from ktui.watch.loop import WatchLoop, WatchSettings
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import state_dir

pytestmark = pytest.mark.worker


def test_a_watch_runs_another_callers_kernel_on_its_worker_and_its_listener_sees_the_run(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    runner = ScriptedRunner(lambda job: Script((Step("correctness", 0.05),)))
    heard = Collector()
    settings = WatchSettings(catch_up=False, audit=False, force_polling=True, owner=Placement())
    loop = WatchLoop(Workspace.at(ws), Options(force_cpu=True), heard, settings, runners=[runner])
    loop.start()
    try:
        assert Ownership.take(state_dir(ws)) is None, "the watch holds the workspace's lock"
        events = list(OwnerLink.connect(state_dir(ws)).run([ws / "kernels" / "add_triton.py"], Options(benchmark=False)))
        assert events[-1].verdict == PASSED
        heard.wait_for(lambda item: isinstance(item, RunFinished))
        assert [e.kernel for e in heard.of(RunStarted)] == ["add_triton"]
        assert any(q.running == "add_triton" for q in heard.of(QueueChanged))
        assert runner.played[0].options.benchmark is False, "the caller's options, not the watch's"
    finally:
        loop.close()
    assert Ownership.take(state_dir(ws)) is not None, "the lock is released when the watch stops"
