"""The worker-side pieces of the format adapters, in-process: reading check_implementation's
answers, KernelBench weight sharing, and running CUDA-minded problem code on the CPU tier."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from ktui.worker.errors import RungFailure
from ktui.worker.formats.gpumode import check_result
from ktui.worker.formats.kernelbench import copy_weights
from ktui.worker.tier import cuda_mapped_to

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "returned, verdict",
    [
        ((True, ""), (True, "")),
        ((False, "mismatch at 3"), (False, "mismatch at 3")),
        ([False, ["a", "b"]], (False, "['a', 'b']")),
        ("", (True, "")),  # earlier GPU MODE problems: an empty string means it passed
        ("mismatch found", (False, "mismatch found")),
        (True, (True, "")),
        (False, (False, "check_implementation returned False")),
        ((torch.tensor(True), "ok"), (True, "ok")),
    ],
)
def test_check_implementation_answers_are_read_in_each_form_gpumode_uses(returned, verdict):
    assert check_result(returned) == verdict


@pytest.mark.parametrize("returned", [None, 3, (1, 2, 3), {"ok": True}])
def test_an_answer_that_is_no_verdict_fails_and_says_what_came_back(returned):
    with pytest.raises(RungFailure, match="expected \\(ok, message\\)"):
        check_result(returned)


class Linear(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n))


class Renamed(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))


def test_weights_are_copied_only_when_the_state_dicts_match_key_for_key():
    ref, same = Linear(4), Linear(4)
    assert not torch.equal(ref.weight, same.weight)
    assert copy_weights(ref, same) == "copied" and torch.equal(ref.weight, same.weight)
    other = Renamed(4)
    before = other.scale.detach().clone()
    assert copy_weights(ref, other) == "seeded" and torch.equal(other.scale, before)
    assert copy_weights(Linear(4), Linear(5)) == "seeded"
    assert copy_weights(nn.ReLU(), nn.ReLU()) == "none"


def test_problem_code_asking_for_cuda_runs_on_the_cpu_tier_and_nothing_leaks_out():
    with cuda_mapped_to("cpu"):
        gen = torch.Generator(device="cuda")
        gen.manual_seed(7)
        a = torch.randn(5, device="cuda", generator=gen)
        b = torch.empty(3, device=torch.device("cuda:0")).cuda()
        c = a.to("cuda", torch.float16)
        torch.cuda.synchronize()
    expected = torch.randn(5, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, expected)  # the same numbers a CPU generator with that seed gives
    assert {a.device.type, b.device.type, c.device.type} == {"cpu"}
    assert torch.Generator is torch._C.Generator
    if not torch.cuda.is_available():  # outside the context, CUDA is as absent as before
        with pytest.raises((RuntimeError, AssertionError)):
            torch.empty(1, device="cuda")


# -- a reference's own FRESH_SHAPES ---------------------------------------------------------------
def _native(tmp_path, rule: str, tests: str = "[{'n': 8}, {'n': 64}]"):
    import importlib.util

    from ktui.protocol.job import Job
    from ktui.worker.formats.native import NativeProblem
    from ktui.worker.tier import detect

    path = tmp_path / "op.py"
    path.write_text(f"TESTS = {tests}\n{rule}\n"
                    "def generate_input(seed, n):\n    return (None,)\n"
                    "def ref_kernel(x):\n    return x\n")
    spec = importlib.util.spec_from_file_location("op", path)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    job = Job(run_id="r", kernel_id="k", kernel_path="k.py", reference_path=str(path), reference_error="",
              reference_hash="", root=str(tmp_path), version=1, content_hash="", source="", run_dir="")
    return NativeProblem(job, detect(force_cpu=True), None, reference, lambda: 1)


@pytest.mark.parametrize("rule, own", [("", None), ("FRESH_SHAPES = None", None), ("FRESH_SHAPES = False", []),
                                       ("FRESH_SHAPES = []", []), ("FRESH_SHAPES = [{'n': 20}]", [{"n": 20}])])
def test_a_references_fresh_shapes_replace_or_turn_off_the_derived_ones(tmp_path, rule, own):
    assert _native(tmp_path, rule).own_fresh_shapes == own


@pytest.mark.parametrize("rule", ["FRESH_SHAPES = True", "FRESH_SHAPES = 2", "FRESH_SHAPES = [('n', 20)]"])
def test_a_malformed_fresh_shapes_fails_pre_checks_saying_what_it_must_be(tmp_path, rule):
    with pytest.raises(RungFailure, match=r"reference op\.py: FRESH_SHAPES must be False or a list of shape dicts"):
        _native(tmp_path, rule)


# -- a reference's own seeds ----------------------------------------------------------------------
def test_a_seed_in_tests_is_the_cases_own_seed_not_part_of_its_shape(tmp_path):
    problem = _native(tmp_path, "BENCHMARKS = [{'n': 4096, 'seed': 7}]\nFRESH_SHAPES = [{'n': 20, 'seed': 3}]",
                      tests="[{'n': 8, 'seed': 4242}, {'n': 64}]")
    assert problem.tests == [{"n": 8}, {"n": 64}] and problem.test_seeds == [4242, None]
    assert problem.benchmarks == [{"n": 4096}] and problem.benchmark_seeds == [7]
    assert problem.own_fresh_shapes == [{"n": 20}]  # a fresh shape gets fresh seeds
    assert problem.declared_seeds == [4242] and problem.declared_by == "TESTS"


def test_a_seed_that_is_not_an_integer_fails_pre_checks_naming_the_case(tmp_path):
    with pytest.raises(RungFailure, match=r"^TESTS\[1\]: seed must be an integer, got '42'$"):
        _native(tmp_path, "", tests="[{'n': 8, 'seed': 1}, {'n': 64, 'seed': '42'}]")
