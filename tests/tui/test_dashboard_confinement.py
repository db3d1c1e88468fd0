"""The dashboard's status line warns when user code is not confined, and says why a kernel that kept
saving its own files is no longer re-run — until it runs again."""

from pathlib import Path

import pytest

from ktui.protocol.events import RunStarted
from ktui.protocol.notices import RerunsStopped, RunnerReady
from ktui.tui.state import DashboardState, KernelView

pytestmark = pytest.mark.unit

WHY = "not confined: KTUI_NO_CONFINE is set"


def _state() -> DashboardState:
    state = DashboardState(Path("/ws"))
    state.kernels["add"] = KernelView(id="add", path="/ws/kernels/add.py", reference="", verdict="passed")
    return state


def _start(confined: bool | None, confinement: str = "") -> RunStarted:
    return RunStarted("r2", kernel="add", path="/ws/kernels/add.py", version=2, content_hash="c", reference="",
                      reference_hash="", tier="cpu", device="CPU (Triton interpreter)", arch="sm_90a", run_dir="",
                      confined=confined, confinement=confinement)


def test_an_unconfined_worker_is_named_on_the_status_line_and_a_confined_one_is_not():
    state = _state()
    state.apply(RunnerReady(tier="cpu", device="CPU (Triton interpreter)", arch="sm_90a", confined=False,
                            confinement=WHY))
    assert state.unconfined == WHY
    state.apply(_start(True, "landlock ABI 7"))
    assert state.unconfined == ""
    state.apply(_start(False, WHY))
    assert state.unconfined == WHY


def test_a_protection_that_did_not_hold_is_named_on_the_status_line():
    state = _state()
    open_network = "landlock ABI 7: writes, reads, signals; network allowed: --allow-network"
    state.apply(_start(True, open_network))
    assert state.unconfined == open_network
    state.apply(_start(True, "landlock ABI 7: writes, reads, network, signals"))
    assert state.unconfined == ""


def test_stopped_reruns_are_said_until_the_kernel_runs_again():
    state = _state()
    stopped = RerunsStopped("add", "/ws/kernels/add.py", "kernel add kept rewriting kernels/add.py …")
    assert state.apply(stopped) == {"add", ""}
    assert state.problem == stopped.message and state.kernels["add"].problem == stopped.message
    state.apply(_start(True, "landlock ABI 7"))
    assert state.problem == "" and state.kernels["add"].problem == ""
