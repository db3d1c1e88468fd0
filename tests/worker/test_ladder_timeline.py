"""Where a run's time goes, and what waits for what: the events the latency breakdown reads."""

from __future__ import annotations

import pytest
from conftest import ktui, make_workspace, parse_events

pytestmark = pytest.mark.worker

PHASES = {"inputs", "candidate", "reference", "metrics"}


def _events(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    result = ktui("run", "--no-audit", "kernels/add_triton.py", "--json", "--no-bench", cwd=root)
    assert result.returncode == 0, result.stderr
    return parse_events(result.stdout)


def test_correctness_rungs_say_where_their_time_went_and_dumps_do_not_delay_them(tmp_path):
    events = _events(tmp_path)
    finished = [e for e in events if e["type"] == "rung_finished"]
    checks = [e for e in finished if e["rung"].startswith("correctness[")]
    assert checks
    for check in checks:
        assert set(check["phases_s"]) == PHASES, check
        assert sum(check["phases_s"].values()) <= check["duration_s"] + 1e-3
    # The dumps are written while the checks run: their rung comes after the checks and before
    # any benchmark, with every artifact announced before it.
    order = [e["rung"] for e in finished]
    assert order.index("dumps") > max(order.index(c["rung"]) for c in checks)
    assert order.index("dumps") < min(i for i, name in enumerate(order) if name.startswith("benchmark["))
    dumps_at = next(i for i, e in enumerate(events) if e["type"] == "rung_finished" and e["rung"] == "dumps")
    artifacts = [i for i, e in enumerate(events) if e["type"] == "artifact"]
    assert artifacts and max(artifacts) < dumps_at
    assert {"sass", "resources", "ptx"} <= {e["kind"] for e in events if e["type"] == "artifact"}
