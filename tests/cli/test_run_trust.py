"""Whether a pass can be trusted, through the real ``ktui run`` and ``ktui history`` (CPU tier, a real
worker and audit process): a wrong kernel that passes a test whose inputs are all zeros is not
trusted, a pass is pending until its reference is audited, and ``--strict`` exits 4 on either."""

from __future__ import annotations

import json

import pytest
from conftest import finished, ktui, make_workspace, parse_events

from ktui.cli.exits import EXIT_OK, EXIT_UNTRUSTED

pytestmark = pytest.mark.worker


def history(ws, kernel: str) -> list[dict]:
    proc = ktui("history", f"kernels/{kernel}.py", "--json", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_a_kernel_times_three_against_a_times_two_reference_of_zeros_is_not_trusted(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["triple_zeros"])
    proc = ktui("run", "--cpu", "--no-bench", "--json", "--strict", "kernels/triple_zeros.py", cwd=ws)
    events = parse_events(proc.stdout)
    end = finished(events)
    assert end["verdict"] == "passed", proc.stderr[-2000:]  # the test cannot tell ×3 from ×2
    assert end["summary"]["trusted"] is False
    assert end["summary"]["trust_reasons"][0].startswith("no signal on every shape")
    audit = next(e for e in events if e["type"] == "audit")
    assert audit["verdict"] == "weak"
    assert proc.returncode == EXIT_UNTRUSTED, proc.stderr[-2000:]
    assert "--strict: triple_zeros v1 passed, but its pass is not trusted: no signal on every shape" in proc.stderr

    (stored,) = history(ws, "triple_zeros")
    assert stored["summary"]["trusted"] is False
    weak = [r for r in stored["summary"]["trust_reasons"] if r.startswith("weak test: ")]  # the audit, since
    assert weak and "a kernel that returns zeros passes" in weak[0], stored["summary"]
    lines = ktui("history", "kernels/triple_zeros.py", cwd=ws).stdout
    assert "NOT TRUSTED: no signal on every shape" in lines


def test_a_pass_is_pending_until_its_reference_is_audited_and_then_trusted_everywhere(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    quiet = ktui("run", "--cpu", "--no-bench", "--json", "--no-audit", "kernels/add_triton.py", cwd=ws)
    assert quiet.returncode == EXIT_OK, quiet.stderr[-2000:]
    first = finished(parse_events(quiet.stdout))["summary"]
    assert first["trusted"] == "pending" and "not audited yet" in first["trust_reasons"][0]
    (stored,) = history(ws, "add_triton")
    assert stored["summary"]["trusted"] == "pending"

    strict = ktui("run", "--cpu", "--no-bench", "--strict", "kernels/add_triton.py", cwd=ws)
    lines = strict.stdout.strip().splitlines()
    assert strict.returncode == EXIT_OK, strict.stdout[-2000:] + strict.stderr[-2000:]
    assert " trust pending: reference not audited yet" in lines[-3], lines[-3:]  # its verdict, then its audit
    assert lines[-2].startswith("audit: strong · references/add.py"), lines[-3:]
    assert lines[-1] == "add_triton v1: trusted", lines[-3:]
    assert [r["summary"]["trusted"] for r in history(ws, "add_triton")] == [True, True]  # the stored pending too


def test_strict_exits_4_on_a_pass_nothing_audited(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--cpu", "--no-bench", "--strict", "--no-audit", "kernels/add_triton.py", cwd=ws)
    assert proc.returncode == EXIT_UNTRUSTED, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "not audited yet" in proc.stderr and "`ktui audit references/add.py` audits it" in proc.stderr
