"""``ktui audit`` tells a weakness of a problem's test from one of ktui's fresh seeds: what passes
only on fresh seeds, and not on the seeds the problem declares, is ktui's own seed problem.

Through the real command (CPU tier) on ``tests/fixtures/audit/seeds/twins.py``, a reference written
here whose inputs are two copies of one tensor for any seed but its own three."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, finished, parse_events
from test_audit import audit, checks

from ktui.agents.audits import digest
from ktui.dispatch.auditor import AuditTarget
from ktui.protocol.events import event_from_json

pytestmark = pytest.mark.worker


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit_seeds") / "ws"
    (root / "references").mkdir(parents=True)
    shutil.copy(FIXTURES / "audit" / "seeds" / "twins.py", root / "references" / "twins.py")
    proc = audit("--json", "references/twins.py", cwd=root)
    return root, proc, parse_events(proc.stdout)


def test_what_passes_only_on_ktuis_fresh_seeds_is_ktuis_seed_problem_not_a_weak_test(twins):
    _, proc, events = twins
    end = finished(events)
    assert proc.returncode == 0 and end["verdict"] == "strong", end["summary"]
    assert end["summary"]["weak"] == [] and end["summary"]["reasons"] == []
    lines = checks(events)
    zeros = lines["mutant[zeros]"]
    assert zeros["status"] == "fresh seeds"
    assert zeros["message"] == ("weak only on ktui's fresh seeds (identical to the right answer on every shape (3)); "
                                "on TESTS's seeds: caught on 3/3 shape(s)")
    assert lines["reference[different seeds]"]["status"] == "fresh seeds"
    reasons = end["summary"]["fresh_seeds"]
    assert all(r.startswith("ktui's own seed problem, not the reference's: ") for r in reasons)
    assert any("a kernel that returns zeros passes on every test shape, on ktui's fresh seeds; on TESTS's seeds, "
               "which every run checks too: caught on 3/3 shape(s)" in r for r in reasons), reasons
    assert {"mean", "replay"} <= set(end["summary"]["fresh_seeds_also"])
    # where the fresh seeds came from, and that the guard saw nothing in each input alone
    assert lines["seeds[fresh]"]["message"] == "TESTS's seeds, then fresh ones from 0–1002 (around them)"


def test_the_plain_lines_say_it_is_ktuis_seeds(twins):
    root, _, _ = twins
    proc = audit("references/twins.py", cwd=root)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("twins: strong · ") for line in lines)
    assert any(line.startswith("  ktui's fresh seeds: ktui's own seed problem, not the reference's: a kernel that "
                               "returns zeros passes") for line in lines), lines


def test_the_mcp_audit_answer_names_what_passes_only_on_fresh_seeds(twins):
    root, _, events = twins
    answer = digest(AuditTarget("twins", root / "references" / "twins.py", root), [event_from_json(e) for e in events])
    assert answer["verdict"] == "strong" and answer["weak"] == []
    assert answer["fresh_seeds"] and all(r.startswith("ktui's own seed problem") for r in answer["fresh_seeds"])
    zeros = next(c for c in answer["checks"] if c["check"] == "mutant[zeros]")
    assert zeros["status"] == "fresh seeds"
