"""One definition of a current result: the kernel's content and its reference's, as on disk."""

import pytest
from conftest import make_workspace

from ktui.history.current import report_is_current
from ktui.protocol.events import CANCELLED, INTERRUPTED, PASSED, finished_run
from ktui.workspace.kernels import content_hash, discover, reference_hash

pytestmark = pytest.mark.unit


def _report(kernel) -> dict:
    return {"content_hash": content_hash(kernel.path.read_bytes()), "reference_hash": reference_hash(kernel)}


def test_a_report_stops_being_current_when_the_reference_changes_not_only_the_kernel(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    [kernel] = discover([ws / "kernels" / "add_triton.py"])
    report = _report(kernel)
    assert report_is_current(report, kernel)
    kernel.reference.write_text(kernel.reference.read_text() + "\n# the test tightened\n")
    assert not report_is_current(report, kernel)


def test_a_report_stops_being_current_when_the_kernel_changes(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    [kernel] = discover([ws / "kernels" / "add_triton.py"])
    report = _report(kernel)
    kernel.path.write_text(kernel.path.read_text() + "\n# edited\n")
    assert not report_is_current(report, kernel)


def test_cancelled_interrupted_and_running_runs_are_not_finished():
    assert finished_run(PASSED) and finished_run("failed")
    assert not any(finished_run(v) for v in (CANCELLED, INTERRUPTED, "running"))
