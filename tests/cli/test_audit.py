"""``ktui audit``: the harness tests its own tests. Through the real command (CPU tier, real audit
processes), in workspaces made here from tests/fixtures/audit/ and the shipped references."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, finished, ktui, parse_events

pytestmark = pytest.mark.worker

AUDIT = FIXTURES / "audit"


def audit(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``ktui audit ARGS`` on the CPU tier, as a user or an agent would run it."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "ktui", "audit", *args, "--cpu"], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": path})


def by_reference(events: list[dict]) -> dict[str, list[dict]]:
    name = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    grouped: dict[str, list[dict]] = {}
    for e in events:
        grouped.setdefault(name[e["run_id"]], []).append(e)
    return grouped


def checks(events: list[dict]) -> dict[str, dict]:
    return {e["rung"]: e for e in events if e["type"] == "rung_finished"}


def files_outside_state(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".ktui" not in p.relative_to(root).parts}


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("audit") / "ws"
    (root / "references").mkdir(parents=True)
    (root / "kernels").mkdir()
    for ref in AUDIT.glob("*.py"):
        if ref.name != "relu_copy_triton.py":
            shutil.copy(ref, root / "references" / ref.name)
    shutil.copy(AUDIT / "relu_copy_triton.py", root / "kernels" / "relu_copy_triton.py")
    shutil.copytree(AUDIT / "tiny_gpumode", root / "tiny_gpumode")
    return root


@pytest.fixture(scope="module")
def audited(ws):
    proc = audit("--json", "references/relu_rand.py", "references/relu_randn.py", "references/tiny.py", "tiny_gpumode",
                 cwd=ws)
    return proc, by_reference(parse_events(proc.stdout))


def test_relu_on_inputs_that_are_never_negative_is_weak_and_names_the_copy_mutant(audited):
    proc, refs = audited
    assert proc.returncode == 4, proc.stderr
    end = finished(refs["relu_rand"])
    assert end["verdict"] == "weak"
    assert "copy of input 0" in end["summary"]["weak"]
    reason = end["summary"]["reasons"][0]
    assert reason.startswith("a kernel that returns a copy of input 0 passes on every test shape — input 0 is never "
                             "negative"), reason
    assert "draw inputs that cover the whole domain (e.g. torch.randn)" in reason
    assert checks(refs["relu_rand"])["mutant[copy of input 0]"]["status"] == "weak"


def test_the_same_relu_on_randn_inputs_is_strong(audited):
    _, refs = audited
    end = finished(refs["relu_randn"])
    assert end["verdict"] == "strong", end["summary"]
    assert end["summary"]["reasons"] == []
    lines = checks(refs["relu_randn"])
    assert lines["mutant[copy of input 0]"]["status"] == "ok"
    assert lines["mutant[copy of input 0]"]["message"].startswith("caught on 3/3 shape(s)")
    assert {"mutant[zeros]", "mutant[unwritten]", "mutant[bf16]", "mutant[replay]", "reference[different seeds]",
            "reference[input 0 influences the answer]"} <= set(lines)


def test_answers_of_1e_9_are_weak_because_zeros_pass_the_problems_check(audited):
    _, refs = audited
    end = finished(refs["tiny_gpumode"])
    assert end["verdict"] == "weak"
    assert end["summary"]["reasons"][0].startswith("a kernel that returns zeros passes on every test shape — the "
                                                   "reference's answers are at most")
    assert "check_implementation accepts zeros" in end["summary"]["reasons"][0]
    assert len(end["summary"]["reasons"]) == 1  # what zeros passing explains is named after it, not repeated
    assert {"half", "mean", "replay"} <= set(end["summary"]["also"])


def test_answers_of_1e_9_under_ktuis_own_tolerance_are_weak_with_the_scale_they_hide(audited):
    _, refs = audited
    end = finished(refs["tiny"])
    assert end["verdict"] == "weak"
    # every answer is below the noise floor, so zeros pass (the correctness rung calls such a shape
    # one with no signal) and name the scale first; what zeros explain (× 2 …) is not repeated
    reasons = end["summary"]["reasons"]
    assert "returns zeros passes" in reasons[0] and "within the absolute tolerance of zero (atol=1e-05)" in reasons[0]
    assert "near zero" in end["summary"]["also"], end["summary"]  # the reference's own check says the same


def test_the_plain_lines_give_one_line_per_check_and_the_verdict_with_its_reasons(ws, audited):
    proc = audit("references/relu_rand.py", cwd=ws)
    assert proc.returncode == 4, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("== audit relu_rand (references/relu_rand.py) · cpu")
    assert "[mutant[copy of input 0]] weak — identical to the right answer on every shape (3)" in lines
    assert any(line.startswith("relu_rand: weak · ") and "cached from" in line for line in lines)  # the fixture's audit
    assert any(line.startswith("  weak: a kernel that returns a copy of input 0") for line in lines)


def test_an_audit_is_cached_per_reference_version_and_done_again_when_it_changes(ws, audited):
    before = audit("--json", "references/relu_randn.py", cwd=ws)
    assert finished(parse_events(before.stdout))["summary"].get("cached"), "audited once already by the fixture"
    (ws / "references" / "relu_randn.py").write_text((ws / "references" / "relu_randn.py").read_text() + "\n# edited\n")
    after = audit("--json", "references/relu_randn.py", cwd=ws)
    end = finished(parse_events(after.stdout))
    assert after.returncode == 0 and end["verdict"] == "strong" and not end["summary"].get("cached")
    stored = list((ws / ".ktui" / "audits").glob("*.json"))
    assert len(stored) >= 4 and all(json.loads(p.read_text())["verdict"] in ("strong", "weak") for p in stored)


def test_ktui_run_of_a_copy_kernel_against_the_weak_problem_says_weak_test(ws, audited):
    proc = ktui("run", "kernels/relu_copy_triton.py", "--cpu", "--no-bench", cwd=ws)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = proc.stdout.strip().splitlines()[-1]
    assert summary.startswith("relu_copy_triton v1 passed · 3/3 correct · NOT TRUSTED: weak test: a kernel that "
                              "returns a copy of input 0 passes · "), summary
    latest = json.loads((ws / ".ktui" / "latest" / "relu_copy_triton.json").read_text())
    assert latest["summary"]["weak_test"].startswith("a kernel that returns a copy of input 0")


def test_the_shipped_references_are_all_strong(tmp_path):
    (tmp_path / "references").mkdir()
    for ref in (REPO / "references").glob("*.py"):
        shutil.copy(ref, tmp_path / "references" / ref.name)
    proc = audit("--json", ".", cwd=tmp_path)  # a workspace: every reference in references/
    refs = by_reference(parse_events(proc.stdout))
    assert set(refs) == {p.stem for p in (REPO / "references").glob("*.py")}
    verdicts = {name: finished(events)["verdict"] for name, events in refs.items()}
    assert proc.returncode == 0 and set(verdicts.values()) == {"strong"}, (verdicts, proc.stderr[-2000:])


def test_a_gpumode_folder_and_a_kernelbench_problem_audit_without_error(tmp_path):
    shutil.copytree(FIXTURES / "gpumode", tmp_path / "gpumode")
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu.py", tmp_path / "scale_shift_relu.py")
    proc = audit("--json", "gpumode", cwd=tmp_path)  # a folder of GPU MODE problems
    kb = audit("--json", "--reference", "scale_shift_relu.py", cwd=tmp_path)  # no kernel needed
    refs = {**by_reference(parse_events(proc.stdout)), **by_reference(parse_events(kb.stdout))}
    assert set(refs) == {"scaleadd", "rowsum", "seedsort", "scale_shift_relu"}, proc.stderr[-2000:] + kb.stderr[-2000:]
    for name, events in refs.items():
        assert finished(events)["verdict"] in ("strong", "weak"), (name, finished(events)["message"])
    assert finished(refs["scale_shift_relu"])["verdict"] == "strong"
    # fresh seeds from task.yml's span: a copy of its input is no sort there (near 2**31 it would be)
    assert finished(refs["seedsort"])["verdict"] == "strong", finished(refs["seedsort"])["summary"]
    assert checks(refs["seedsort"])["mutant[copy of data[0]]"]["status"] == "ok"
    scaleadd = checks(refs["scaleadd"])
    assert "mutant[copy of data[0]]" in scaleadd and "mutant[copy of data[2]]" not in scaleadd  # out is no input


def test_bad_references_are_told_with_their_file_and_line_and_nothing_is_written_outside_ktui(ws):
    before = files_outside_state(ws)
    proc = audit("--json", "--fresh", "--timeout", "2", "references/gen_raises.py", "references/gen_none.py",
                 "references/ref_raises.py", "references/ref_crashes.py", "references/ref_hangs.py",
                 "references/relu_randn.py", cwd=ws)
    refs = by_reference(parse_events(proc.stdout))
    assert proc.returncode == 2, proc.stderr
    messages = {name: finished(events)["message"] for name, events in refs.items()}
    assert messages["gen_raises"].startswith("gen_raises.py:10: generate_input(seed="), messages
    assert "size=-1) raised RuntimeError: Trying to create tensor with negative dimension" in messages["gen_raises"]
    assert messages["gen_none"].startswith("gen_none.py:6: generate_input(seed=")
    assert messages["gen_none"].endswith("returned None: the inputs must hold at least one tensor")
    assert messages["ref_raises"].startswith("ref_raises.py:14: ref_kernel raised on size=16")
    assert "KeyError: 'triple'" in messages["ref_raises"]
    assert "the audit process died (killed by SIGSEGV) in ref_kernel at ref_crashes.py:16" in messages["ref_crashes"]
    assert messages["ref_hangs"].endswith("no answer within 2 s — stuck in ref_kernel at ref_hangs.py:17")
    errors = {name: finished(events)["verdict"] for name, events in refs.items() if name != "relu_randn"}
    assert set(errors.values()) == {"error"}
    assert finished(refs["relu_randn"])["verdict"] == "strong"  # a fresh audit process after the hang
    located = checks(refs["ref_raises"])["audit"]["error"]["location"]
    assert Path(located["file"]).name == "ref_raises.py" and located["line"] == 14
    assert files_outside_state(ws) == before


def test_what_cannot_be_audited_is_said_before_anything_runs(ws):
    missing = audit("references/nope.py", cwd=ws)
    assert missing.returncode == 2 and "references/nope.py: no such file or folder" in missing.stderr
    nothing = audit(cwd=ws)
    assert nothing.returncode == 2 and "audit what?" in nothing.stderr
    (ws / "kernels" / "orphan_triton.py").write_text("def custom_kernel(x):\n    return x\n")
    orphan = audit("kernels/orphan_triton.py", cwd=ws)
    assert orphan.returncode == 2 and "no reference for orphan_triton.py" in orphan.stderr
    (ws / "kernels" / "orphan_triton.py").unlink()


BATCHNORM_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.rand(8, 4, 16, 16)]


def get_init_inputs():
    return [4]
'''


def test_a_kernelbench_batchnorm_normalises_with_the_batch_as_their_evaluator_does(tmp_path):
    # KernelBench's evaluator leaves the model in training mode; in eval mode a fresh BatchNorm is
    # the identity and a copy of the non-negative input would pass for it.
    (tmp_path / "batchnorm.py").write_text(BATCHNORM_PROBLEM)
    proc = audit("--json", "--reference", "batchnorm.py", cwd=tmp_path)
    events = parse_events(proc.stdout)
    copy = [e for e in events if e["type"] == "rung_finished" and e["rung"].startswith("mutant[copy of")]
    assert copy, proc.stderr[-2000:]
    assert all(not e["figures"]["passes"] and e["figures"]["caught"] for e in copy), copy
    assert finished(events)["verdict"] == "strong", finished(events)["message"]
