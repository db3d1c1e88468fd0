"""A run that never reaches a worker has one shape, whoever tells it: a start, maybe the pre-checks, a finish."""

import pytest
from conftest import make_workspace

from ktui.dispatch.scripted import ScriptedRunner
from ktui.dispatch.session import Session
from ktui.protocol.events import ERROR, FAILED, RunFinished, RungFinished, RunStarted
from ktui.protocol.job import Options
from ktui.workspace.kernels import discover

pytestmark = pytest.mark.unit


def test_a_kernel_with_no_reference_is_started_failed_at_the_pre_checks_and_finished_error_without_a_worker(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "orphan_triton.py").write_text("import triton\n")
    [kernel] = discover([ws / "kernels" / "orphan_triton.py"])
    runner = ScriptedRunner()
    session = Session(ws, runner=runner)
    try:
        events = list(session.events(session.prepare(kernel, Options())))
        stored = session.store.latest_run("orphan_triton")
    finally:
        session.close()
    assert [type(e) for e in events] == [RunStarted, RungFinished, RunFinished]
    assert events[0].tier == "-" and (events[1].rung, events[1].status) == ("pre-checks", FAILED)
    assert events[2].verdict == ERROR and events[2].summary["first_failure"]["rung"] == "pre-checks"
    assert stored.verdict == ERROR and runner.played == []
