"""The rung table (ktui/protocol/rungs.py) and the worker's implementations agree row for row, and
a run reports exactly the table's rungs."""

import pytest
from conftest import ktui, make_workspace, parse_events

from ktui.protocol.job import DEFAULT_TIMEOUTS, Options
from ktui.protocol.rungs import RUNGS, rung_family
from ktui.worker.rungs.registry import IMPLEMENTATIONS


@pytest.mark.unit
def test_every_row_of_the_rung_table_has_one_implementation_in_the_worker_and_no_other_exists():
    assert [rung.name for rung in RUNGS] == list(IMPLEMENTATIONS)
    assert all(callable(fn) for fn in IMPLEMENTATIONS.values())


@pytest.mark.unit
def test_a_rungs_default_time_limit_is_its_rows():
    assert {rung.name: rung.timeout_s for rung in RUNGS} == DEFAULT_TIMEOUTS
    correctness = next(rung for rung in RUNGS if rung.name == "correctness")
    assert Options().timeout_for("correctness[size=7]") == correctness.timeout_s


@pytest.mark.unit
def test_the_timed_rung_never_holds_a_shared_turn_of_the_gpu_lock():
    """The benchmark takes the GPU alone inside its rung. Taken inside a shared turn of the same
    process, the lock (one descriptor per file and process) would turn the shared hold into the
    exclusive one, and its release would end both turns at once."""
    sharing = {rung.name for rung in RUNGS if rung.shares_gpu}
    assert "benchmark" not in sharing
    assert sharing == {"compile", "run", "correctness", "fresh-shapes", "integrity", "dependence"}


@pytest.mark.worker
def test_a_run_reports_every_rung_of_the_table_and_no_other(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--cpu", "--json", "kernels/add_triton.py", cwd=root)
    finished = [e["rung"] for e in parse_events(proc.stdout) if e["type"] == "rung_finished"]
    assert {rung_family(name) for name in finished} == {rung.name for rung in RUNGS}
    per_shape = {rung.name for rung in RUNGS if rung.per_shape}
    assert all(("[" in name) == (rung_family(name) in per_shape) for name in finished)
