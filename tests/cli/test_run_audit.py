"""``ktui run`` names a weak test without a separate command: after the verdicts, a reference version
never audited gets the audit's fast checks, which never hold a verdict back. A one-shot run (the
tests' default: no daemon) exits at its verdicts and says how to audit; ``--strict`` waits for the
audit and says what passes.

Through the real command (CPU tier, a real worker and audit process) on a KernelBench-format pair
made here: ``19_ReLU.py`` (ReLU on ``torch.rand`` inputs, as KernelBench's) and a candidate that
returns a copy of its input; and on the shipped add problem whose audit waits for a file
(``tests/held_audit.py``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, child_env, finished, ktui, make_workspace, parse_events
from held_audit import KERNEL, REFERENCE, audit_records, held_audit

from ktui.cli.exits import EXIT_UNTRUSTED
from ktui.dispatch.auditor import AUDIT_VERSION, cached
from ktui.dispatch.first_audit import short_reason

KB = FIXTURES / "kernelbench"
RUN = ("run", "--cpu", "--no-bench", "--seed", "1", "relu_copy_modelnew.py", "--reference", "19_ReLU.py")


def relu_pair(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name in ("19_ReLU.py", "relu_copy_modelnew.py"):
        shutil.copy(KB / name, folder / name)
    return folder


def records(pair: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in audit_records(pair)]


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    pair = relu_pair(tmp_path_factory.mktemp("audit_run") / "pair")
    return pair, ktui(*RUN, "--strict", cwd=pair)


@pytest.mark.worker
def test_the_first_strict_run_against_a_weak_test_ends_with_what_passes_it_after_the_verdict(first):
    pair, proc = first
    assert proc.returncode == EXIT_UNTRUSTED, proc.stdout[-3000:] + proc.stderr[-2000:]  # --strict's final word
    lines = proc.stdout.strip().splitlines()
    assert lines[-2].endswith("weak test: a copy of input 0 passes"), lines[-3:]
    assert lines[-2].startswith("audit 19_ReLU.py "), lines[-2]
    assert lines[-3].startswith("relu_copy_modelnew v1 passed · 5/5 correct"), lines[-3]  # the verdict came first
    assert "trust pending" in lines[-3]  # then what the audit makes of it
    assert lines[-1] == "relu_copy_modelnew v1: NOT TRUSTED: weak test: a kernel that returns a copy of input 0 passes"
    (record,) = records(pair)
    assert (record["verdict"], record["fast"]) == ("weak", True)


@pytest.mark.worker
def test_a_second_run_of_the_same_reference_version_audits_nothing_and_reads_the_cache(first):
    pair, _ = first
    proc = ktui(*RUN, cwd=pair)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert not [line for line in lines if line.startswith("audit")], lines[-3:]
    assert "not audited" not in proc.stderr, proc.stderr
    assert "NOT TRUSTED: weak test: a kernel that returns a copy of input 0 passes ·" in lines[-1], lines[-1]


@pytest.mark.worker
def test_no_audit_audits_nothing_and_json_tells_the_audit_as_an_object_of_its_own(tmp_path):
    pair = relu_pair(tmp_path / "pair")
    quiet = ktui(*RUN, "--no-audit", "--json", cwd=pair)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert [e["type"] for e in parse_events(quiet.stdout)][-1] == "run_finished"
    assert "not audited" not in quiet.stderr, quiet.stderr
    assert not (pair / ".ktui" / "audits").exists()

    later = ktui(*RUN, "--json", cwd=pair)  # one-shot: nothing outlives it to audit the reference
    pending = parse_events(later.stdout)[-1]
    assert later.returncode == 0 and (pending["type"], pending["verdict"]) == ("audit", "pending"), later.stdout[-2000:]
    assert pending["auditing"] is None and pending["kernels"] == ["relu_copy_modelnew"], pending
    assert not (pair / ".ktui" / "audits").exists()

    told = ktui(*RUN, "--json", "--strict", cwd=pair)
    records = parse_events(told.stdout)  # every line is JSON
    assert told.returncode == EXIT_UNTRUSTED and finished(records)["verdict"] == "passed", told.stderr[-2000:]
    audit, trust = records[-2:]
    assert (trust["type"], trust["trusted"], trust["kernel"]) == ("trust", False, "relu_copy_modelnew"), trust
    assert (audit["type"], audit["verdict"], audit["checks"]) == ("audit", "weak", "fast"), audit
    assert audit["weak"] == ["a copy of input 0 passes"] and audit["kernels"] == ["relu_copy_modelnew"]
    assert audit["reference_hash"] == records[0]["reference_hash"]  # the version the run recorded


@pytest.mark.unit
def test_a_fast_audit_never_stands_in_for_a_full_one_but_its_weak_is_read_as_weak(tmp_path):
    state = tmp_path / ".ktui"
    (state / "audits").mkdir(parents=True)
    record = {"audit_version": AUDIT_VERSION, "shapes": None, "fast": True, "verdict": "strong", "reasons": []}
    (state / "audits" / "abc.json").write_text(json.dumps(record))
    assert cached(state, "abc") is None  # `ktui audit`, the watch: the full checks still to do
    assert cached(state, "abc", fast_ok=True)["verdict"] == "strong"  # `ktui run`: audited already


@pytest.mark.unit
def test_a_reason_is_told_in_a_few_words():
    reason = ("a kernel that returns a copy of input 0 passes on every test shape — input 0 is never negative "
              "(its smallest value is 5.9e-05), so …")
    assert short_reason(reason) == "a copy of input 0 passes"
    assert short_reason("a kernel that computes a float32 answer in bfloat16 passes on every test shape — …") == (
        "a kernel that computes a float32 answer in bfloat16 passes")


@pytest.mark.worker
def test_a_one_shot_run_exits_at_its_verdict_while_its_audit_would_wait_and_says_how_to_audit(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    held_audit(ws)  # never released: the answer arriving at all shows the audit was not waited for
    proc = ktui("run", "--cpu", "--no-bench", "--no-fresh-shapes", KERNEL, cwd=ws)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    verdict = proc.stdout.strip().splitlines()[-1]
    assert verdict.startswith("heldaudit_triton v1 passed · 5/5 correct · trust pending: reference not audited yet")
    assert proc.stderr.splitlines()[-1] == (f"ktui: {REFERENCE}: not audited yet: `ktui audit {REFERENCE}` audits it "
                                            "(--strict waits for it)"), proc.stderr
    assert not audit_records(ws)


@pytest.mark.worker
def test_strict_waits_for_the_audit_after_its_verdict_and_tells_what_it_makes_of_the_pass(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    go = held_audit(ws)
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--cpu", "--no-bench", "--strict", KERNEL], cwd=ws,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    line = ""
    try:
        for line in proc.stdout:
            if line.startswith("heldaudit_triton v1 "):
                break
        assert "passed" in line and "trust pending" in line, line
        assert proc.poll() is None, "its verdict is out and its audit held: --strict waits for the audit"
        go.write_text("go")
        out, err = proc.communicate(timeout=600)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    lines = out.strip().splitlines()
    assert lines[-2].startswith(f"audit: strong · {REFERENCE} (fast checks, ") and lines[-1] == (
        "heldaudit_triton v1: trusted"), lines[-3:]
    assert len(audit_records(ws)) == 1


@pytest.mark.worker
@pytest.mark.gpu
def test_on_the_gpu_the_first_strict_run_also_ends_with_the_weak_test(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    pair = relu_pair(tmp_path / "pair")
    proc = ktui("run", "--no-bench", "--strict", "--seed", "1", "relu_copy_modelnew.py", "--reference", "19_ReLU.py",
                cwd=pair)
    assert proc.returncode == EXIT_UNTRUSTED, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert " · gpu · " in lines[0] and lines[-3].startswith("relu_copy_modelnew v1 passed"), lines
    assert lines[-2].endswith("weak test: a copy of input 0 passes"), lines[-3:]
