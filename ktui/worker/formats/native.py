"""ktui's own contract: ``references/<op>.py`` with ``generate_input(seed, **shape)``,
``ref_kernel(*inputs)``, ``TESTS``, ``BENCHMARKS``, optional ``TOLERANCES`` and ``FRESH_SHAPES``;
the candidate's ``custom_kernel(*inputs)``. A ``TESTS`` case may declare its own ``seed`` (checked
beside fresh ones, ``ktui.worker.seeds``); it is not part of the shape."""

from __future__ import annotations

from typing import Any

from ktui.worker.errors import RungFailure
from ktui.worker.formats.base import FRESH_SHAPES, Problem

REQUIRED_IN_REFERENCE = ("generate_input", "ref_kernel", "TESTS")
OPTIONAL_IN_REFERENCE = ("BENCHMARKS", "TOLERANCES", FRESH_SHAPES, "flops", "bytes_moved")


class NativeProblem(Problem):
    format = "native"

    def __init__(self, job, tier, candidate, reference, next_seed):
        super().__init__(job, tier, candidate, reference, next_seed)
        self.require(REQUIRED_IN_REFERENCE)
        self.note_misspelt(OPTIONAL_IN_REFERENCE)
        if not isinstance(reference.TESTS, (list, tuple)) or not reference.TESTS:
            raise RungFailure(f"reference {self.reference_name}: TESTS must be a non-empty list of shape dicts")
        self.declared_by = "TESTS"
        self.tests, self.own_test_seeds = self.split_cases(list(reference.TESTS), "TESTS")
        self.benchmarks, self.benchmark_seeds = self.split_cases(list(getattr(reference, "BENCHMARKS", [])), "BENCHMARKS")
        self.tolerances = getattr(reference, "TOLERANCES", None)
        self.read_fresh_shapes()

    def generate(self, shape: dict, seed: int) -> tuple:
        data = self.reference.generate_input(seed=seed, **shape)
        return data if isinstance(data, tuple) else (data,)

    def ref_kernel(self, *inputs: Any) -> Any:
        return self.reference.ref_kernel(*inputs)

    def custom_kernel(self, *inputs: Any) -> Any:
        return self.candidate.custom_kernel(*inputs)


PROBLEM = NativeProblem
