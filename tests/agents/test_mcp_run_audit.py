"""The MCP ``run`` tool audits each reference version never audited, as ``ktui run`` does, through
the MCP SDK's own client on the CPU tier: it answers at its verdicts and the audit goes on in the
server (a queue of its own: the tests run no daemon), where a later call reads what it found;
``strict`` waits for it."""

from __future__ import annotations

import anyio
import pytest
from conftest import make_workspace
from held_audit import KERNEL, REFERENCE, audit_records, held_audit
from test_mcp import call, connect
from test_mcp_audit_output import WEAK_KERNEL, WEAK_REFERENCE
from waits import until

pytestmark = pytest.mark.worker


def test_a_strict_run_audits_a_new_reference_whose_inputs_are_all_zeros_and_names_it_weak_in_the_summary(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "references" / "twice.py").write_text(WEAK_REFERENCE)
    (ws / "kernels" / "twice_triton.py").write_text(WEAK_KERNEL)

    async def main():
        async with connect(ws) as session:
            kernel = ["kernels/twice_triton.py"]
            unaudited = await call(session, "run", paths=kernel, no_bench=True, seed=1, audit=False)
            assert "weak_test_reasons" not in unaudited["kernels"][0]["summary"] and "audits" not in unaudited
            ran = await call(session, "run", paths=kernel, no_bench=True, seed=1, strict=True)
            (twice,) = ran["kernels"]
            assert twice["verdict"] == "passed" and ran["all_passed"] is True, twice  # a notice, not a failure
            (audit,) = ran["audits"]
            assert audit["verdict"] == "weak" and audit["reference"] == "references/twice.py", audit
            weak = twice["summary"]
            assert weak["weak_test_reasons"] == audit["reasons"] and "seed" in weak["weak_test_reasons"][0], weak
            assert weak["trusted"] is False and any(r.startswith("weak test: ") for r in weak["trust_reasons"]), weak
            assert any("zeros" in reason for reason in weak["weak_test_reasons"]), weak["weak_test_reasons"]
            again = await call(session, "run", paths=kernel, no_bench=True, seed=1)
            assert "audits" not in again, "a reference version audited once is not audited again"
            assert again["kernels"][0]["summary"]["weak_test_reasons"] == weak["weak_test_reasons"]  # from the cache
            assert again["kernels"][0]["summary"]["trusted"] is False

    anyio.run(main)
    assert list((ws / ".ktui" / "audits").iterdir()), "cached in .ktui/audits like the CLI's"


def test_run_answers_at_its_verdicts_while_the_audit_goes_on_in_the_server_and_a_later_call_reads_its_finding(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    go = held_audit(ws)

    async def main():
        async with connect(ws) as session:
            ran = await call(session, "run", paths=[KERNEL], no_bench=True, seed=1)  # its audit held
            (held,) = ran["kernels"]
            assert held["verdict"] == "passed" and held["summary"]["trusted"] == "pending", held
            assert ran["all_passed"] is True and ran["all_trusted"] is False
            (audit,) = ran["audits"]
            assert (audit["reference"], audit["verdict"]) == (REFERENCE, "pending"), audit
            assert "the MCP server (pid " in audit["message"] and "audits it in the background" in audit["message"]
            assert not audit_records(ws)
            go.write_text("go")  # the audit goes on in the server, the call long answered
            assert await anyio.to_thread.run_sync(until, lambda: audit_records(ws)), "the server finished the audit"
            assert (await call(session, "latest", kernel="heldaudit_triton"))["summary"]["trusted"] is True
            again = await call(session, "run", paths=[KERNEL], no_bench=True, seed=1)
            assert "audits" not in again and again["kernels"][0]["summary"]["trusted"] is True, again

    anyio.run(main)
