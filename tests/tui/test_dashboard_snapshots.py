"""Each pane of the dashboard, as SVG snapshots at 80×24 (tabs) and 160×48 (side by side).

The history comes from real CPU-tier runs recorded by tests/fixtures/dashboard/record.py and
replayed at a fixed clock; softmax_h200's GPU history is synthetic (see dashboard_fixture.py).
Update after an intended change with ``pytest tests/tui/test_dashboard_snapshots.py --snapshot-update``
and look at the SVGs in tests/tui/__snapshots__/.
"""

from __future__ import annotations

import pytest
from dashboard_fixture import add_synthetic_gpu_history, replay_cpu_history

from ktui.tui.app import KtuiApp
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.unit

# pane number → the kernel whose pane says the most
CASES = {
    1: "compile_error",   # a compile error at file:line with the source around it
    2: "add_triton",      # the ladder; the file was edited after the run, so the status bar says STALE
    3: "softmax_h200",    # speedup history (synthetic GPU figures)
    4: "softmax_triton",  # SASS of v3 against v1, the previous passing version
    5: "softmax_h200",    # an ncu summary older than the code
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    ws, now = replay_cpu_history(tmp_path_factory.mktemp("snap") / "ws")
    add_synthetic_gpu_history(ws, now)
    kernel = ws / "kernels" / "add_triton.py"
    kernel.write_text(kernel.read_text() + "\n# edited after its last run\n")
    return ws, now


def make_app(recorded) -> KtuiApp:
    ws, now = recorded
    return KtuiApp(Workspace.at(ws), live=False, clock=lambda: now)


def show(number: int, kernel: str):
    async def run_before(pilot) -> None:
        await pilot.pause()
        pilot.app._select(kernel)
        await pilot.press(str(number))
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("number", sorted(CASES))
def test_pane_snapshot(snap_compare, recorded, number, size):
    assert snap_compare(make_app(recorded), terminal_size=size, run_before=show(number, CASES[number]))


def test_help_snapshot(snap_compare, recorded):
    assert snap_compare(make_app(recorded), terminal_size=(80, 24), press=["question_mark"])
