"""The one rule of trust (``ktui.dispatch.trust``): each reason a pass is not trusted, and pending
until its reference version is audited, read from real audit records in a ``.ktui/`` folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ktui.dispatch.auditor import AUDIT_VERSION
from ktui.dispatch.trust import AUDIT_FAILED, PENDING, AuditState, Trust, current, judge, with_trust
from ktui.protocol.lines import summary_line
from ktui.protocol.statedir import audit_file

pytestmark = pytest.mark.unit

PASS = {"correct": [3, 3]}
WEAK_REASON = "a kernel that returns zeros passes on every test shape — the reference's answer is all zeros; draw …"


def audited(state: Path, digest: str, verdict: str, reasons: list[str] = ()) -> None:
    """The record ``ktui audit`` (or ``ktui run``'s fast audit) leaves for one reference version."""
    path = audit_file(state, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"audit_version": AUDIT_VERSION, "shapes": None, "fast": True, "verdict": verdict,
                                "reasons": list(reasons)}))


def test_a_pass_against_a_reference_audited_strong_is_trusted(tmp_path):
    audited(tmp_path, "r1", "strong")
    trust = current(tmp_path, "passed", PASS, "r1")
    assert (trust.trusted, trust.reasons) == (True, ())
    assert with_trust(PASS, trust) == {**PASS, "trusted": True}


def test_a_pass_whose_reference_was_never_audited_is_pending_until_its_record_exists(tmp_path):
    pending = current(tmp_path, "passed", PASS, "r1")
    assert pending.trusted == PENDING and "not audited yet" in pending.reasons[0]
    audited(tmp_path, "r1", "strong")  # whoever audited it: `ktui run`, the MCP run, a watch, an owner
    assert current(tmp_path, "passed", with_trust(PASS, pending), "r1").trusted is True


def test_a_weak_test_is_not_trusted_and_says_which_trivial_kernel_passes(tmp_path):
    audited(tmp_path, "r1", "weak", [WEAK_REASON])
    trust = current(tmp_path, "passed", PASS, "r1")
    assert trust.trusted is False
    assert trust.reasons == ("weak test: a kernel that returns zeros passes",)


def test_no_signal_on_every_shape_is_not_trusted_even_before_any_audit(tmp_path):
    silent = {"correct": [2, 2], "no_signal": ["correctness[size=1000]", "correctness[size=4096]"]}
    trust = current(tmp_path, "passed", silent, "r1")
    assert trust.trusted is False and trust.reasons[0].startswith("no signal on every shape")
    some = {"correct": [2, 2], "no_signal": ["correctness[size=1000]"]}  # another shape had signal
    assert current(tmp_path, "passed", some, "r1").trusted == PENDING


def test_correctness_not_checked_is_not_trusted(tmp_path):
    audited(tmp_path, "r1", "strong")
    trust = current(tmp_path, "passed", {"unchecked": "no test shape ran"}, "r1")
    assert trust.trusted is False and trust.reasons == ("correctness not checked: no test shape ran",)


def test_an_audit_that_could_not_judge_the_reference_is_not_trusted_but_a_record_wins_over_it(tmp_path):
    failed = AuditState(AUDIT_FAILED, message="generate_input raised ValueError")
    trust = current(tmp_path, "passed", PASS, "r1", failed)
    assert trust.trusted is False
    assert trust.reasons == ("the reference could not be audited: generate_input raised ValueError",)
    audited(tmp_path, "r1", "strong")
    assert current(tmp_path, "passed", PASS, "r1", failed).trusted is True


def test_a_run_that_did_not_pass_is_never_trusted():
    strong = AuditState("strong")
    for verdict in ("failed", "compiled", "suspicious", "cancelled"):
        assert judge(verdict, PASS, strong) == Trust(False)  # its verdict and first failure say why


def test_the_headline_says_trust_in_words_once():
    weak = with_trust({**PASS, "weak_test": WEAK_REASON, "weak_test_reasons": [WEAK_REASON]},
                      judge("passed", PASS, AuditState("weak", (WEAK_REASON,))))
    line = summary_line("k", 1, "passed", weak, "cpu", "sm_90a", 1.0)
    assert "NOT TRUSTED: weak test: a kernel that returns zeros passes" in line
    assert line.count("weak test") == 1
    silent = {"correct": [1, 1], "no_signal": ["correctness[size=8]"]}
    line = summary_line("k", 1, "passed", with_trust(silent, judge("passed", silent, AuditState("strong"))),
                        "cpu", "sm_90a", 1.0)
    assert line.count("no signal") == 1 and "NOT TRUSTED: no signal on every shape" in line
    pending = with_trust(PASS, judge("passed", PASS, AuditState("none")))
    assert "trust pending: reference not audited yet" in summary_line("k", 1, "passed", pending, "cpu", "sm_90a", 1.0)
    failed = with_trust({"first_failure": {"rung": "run", "status": "failed", "message": "boom"}},
                        judge("failed", {}, AuditState("strong")))
    assert "trust" not in summary_line("k", 1, "failed", failed, "cpu", "sm_90a", 1.0).lower()
