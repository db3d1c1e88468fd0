"""The audit's judgement of a reference's test, in the process that runs user code (CPU tier).

Each reference here is written to a file and audited as ``python -m ktui.worker.audit`` audits it:
loaded through its format's adapter, every test shape drawn, every mutant judged by the
judgement a kernel gets."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ktui.protocol.job import Job, Options
from ktui.worker.audit.runner import Audit, Settings, audit, load
from ktui.worker.context import RunContext
from ktui.worker.modules import job_imports
from ktui.worker.tier import detect

pytestmark = pytest.mark.unit

HEADER = '''
import torch


def _randn(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
'''


def audited(tmp_path: Path, body: str) -> Audit:
    ref = tmp_path / "references" / "op.py"
    ref.parent.mkdir(parents=True, exist_ok=True)
    source = HEADER + body
    ref.write_text(source)
    job = Job(run_id=uuid.uuid4().hex, kernel_id="op", kernel_path=str(ref), reference_path=str(ref),
              reference_error="", reference_hash="", root=str(tmp_path), version=0, content_hash="", source=source,
              run_dir="", options=Options(force_cpu=True, seed=7))
    ctx = RunContext(job=job, tier=detect(force_cpu=True), emit=lambda event: None)
    with job_imports(job):
        load(ctx)
        return audit(ctx, Settings())


def result(done: Audit, rung: str):
    return next(r for r in done.results if r.rung == rung)


def test_a_mutant_that_passes_on_some_shapes_is_listed_with_them_and_leaves_the_test_strong(tmp_path):
    done = audited(tmp_path, '''
TESTS = [{"rows": 3, "cols": 1}, {"rows": 5, "cols": 17}]

def generate_input(seed, rows, cols):
    return (_randn(seed, rows, cols) * 3,)

def ref_kernel(x):
    return torch.softmax(x.double(), dim=-1).float()
''')
    assert done.verdict.verdict == "strong", done.verdict.reasons
    ones = result(done, "mutant[ones]")
    assert ones.status == "ok" and ones.partial == "ones passes on rows=3,cols=1 (caught on 1 other shape(s))"
    assert ones.partial in done.verdict.partial


def test_an_input_the_answer_ignores_makes_the_test_weak_and_is_named(tmp_path):
    done = audited(tmp_path, '''
TESTS = [{"size": 64}, {"size": 1000}]

def generate_input(seed, size):
    return _randn(seed, size), _randn(seed + 1, size)

def ref_kernel(x, y):
    return x * 2
''')
    assert done.verdict.verdict == "weak"
    assert result(done, "reference[input 1 influences the answer]").status == "weak"
    assert result(done, "reference[input 0 influences the answer]").status == "ok"
    assert done.verdict.reasons == ["input 1 does not influence the answer: drawn afresh, the old answer still passes "
                                    "on every test shape — a kernel that ignores input 1 passes; make the answer "
                                    "depend on it, or leave it out"]


def test_a_generator_that_ignores_its_seed_is_weak_and_the_replayed_answer_passing_is_named_after_it(tmp_path):
    done = audited(tmp_path, '''
TESTS = [{"size": 64}, {"size": 1000}]

def generate_input(seed, size):
    return (_randn(0, size),)

def ref_kernel(x):
    return x.abs()
''')
    assert done.verdict.verdict == "weak"
    assert done.verdict.reasons[0].startswith("generate_input gives the same inputs whatever the seed, on every test "
                                              "shape")
    assert "replay" in done.verdict.also


def test_a_float32_tolerance_looser_than_bfloat16_rounding_lets_a_bfloat16_answer_pass(tmp_path):
    done = audited(tmp_path, '''
TESTS = [{"size": 64}, {"size": 1000}]
TOLERANCES = {"float32": {"atol": 1e-2, "rtol": 1e-2}}

def generate_input(seed, size):
    return (_randn(seed, size),)

def ref_kernel(x):
    return torch.sin(x)
''')
    assert result(done, "mutant[bf16]").status == "weak"
    assert result(done, "mutant[fp16]").status == "weak"
    assert done.verdict.reasons == [
        "a kernel that computes a float32 answer in bfloat16 passes on every test shape — ktui's float32 tolerance "
        "(atol=0.01, rtol=0.01, cosine ≥ 0.99999) is looser than bfloat16's rounding (relative error up to 2.0e-03); "
        "if float32 accuracy is meant, tighten TOLERANCES"]
    assert done.verdict.also == ["fp16"]


def test_a_reference_whose_answer_changes_between_two_calls_is_weak_with_the_difference_it_measured(tmp_path):
    done = audited(tmp_path, '''
TESTS = [{"size": 256}]

def generate_input(seed, size):
    return (_randn(seed, size),)

def ref_kernel(x):
    return x + 1e-3 * torch.rand(x.shape)  # an unseeded draw: not the same answer twice
''')
    check = result(done, "reference[same inputs, same answer]")
    assert check.status == "weak" and 0 < check.figures["max_abs"] <= 1e-3
    assert check.reason.startswith("ref_kernel gives answers that differ by up to")
    assert "a right kernel can fail at random" in check.reason
