"""The one interface the rungs call, whatever the problem's format (worker side).

``inputs`` is always a tuple the candidate is called with as ``*inputs``: ktui's own contract
passes several tensors, GPU MODE one ``data`` object (so ``inputs == (data,)``), KernelBench the
list ``get_inputs()`` returns. Everything a format does differently lives in its subclass.
"""

from __future__ import annotations

import contextlib
import difflib
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, ContextManager

from ktui.protocol.job import Job
from ktui.worker.errors import RungFailure
from ktui.worker.outcome import shape_label
from ktui.worker.outputs import flatten
from ktui.worker.seeds.ranges import split_seed
from ktui.worker.tier import Tier

FRESH_SHAPES = "FRESH_SHAPES"  # the reference's own fresh shapes, or False: see ``read_fresh_shapes``


class Problem:
    format = ""

    def __init__(self, job: Job, tier: Tier, candidate: ModuleType, reference: ModuleType,
                 next_seed: Callable[[], int]):
        self.job = job
        self.tier = tier
        self.candidate = candidate
        self.reference = reference  # the module: optional extras (flops, bytes_moved) are read from it
        self.reference_name = Path(job.reference_path).name
        self.tests: list[dict] = []
        self.benchmarks: list[dict] = []
        self.tolerances: dict | None = None
        # Fresh shapes (rung ``fresh-shapes``): a problem without a shape list has none to derive;
        # ``own_fresh_shapes`` is the reference's ``FRESH_SHAPES`` ([] turns the rung off), None: derived.
        self.declares_shapes = True
        self.own_fresh_shapes: list[dict] | None = None
        self.notes: list[str] = []  # what the adapter did, said in the pre-checks message
        self.figures: dict[str, Any] = {}
        # The problem's own seed of each test and benchmark case (None: it declares none; see
        # ``test_seeds``), and where they are declared, as messages name it: ``task.yml``, ``TESTS``.
        self.own_test_seeds: list[int | None] = []
        self.benchmark_seeds: list[int | None] = []
        self.declared_by = ""

    def require(self, names: tuple[str, ...], what: str = "reference", callables: bool = False) -> None:
        """Fail pre-checks naming every contract name the reference module lacks."""

        present = (lambda n: callable(getattr(self.reference, n, None))) if callables else \
            (lambda n: hasattr(self.reference, n))
        missing = [n for n in names if not present(n)]
        if missing:
            raise RungFailure(f"{what} {self.reference_name} lacks {', '.join(missing)}"
                              f"{misspelt_note(self.reference, missing)}")

    def note_misspelt(self, optional: tuple[str, ...]) -> None:
        """An optional name the reference defines under a close spelling (``BENCHMARK``) is not
        read: said in the pre-checks message rather than silently meaning none."""
        for name in optional:
            found = None if hasattr(self.reference, name) else misspelt(self.reference, name)
            if found:
                self.notes.append(f"{found} is not a name ktui reads: did you mean {name}?")

    def split_cases(self, cases: list, where: str) -> tuple[list, list[int | None]]:
        """Test or benchmark cases as shapes without their ``seed``, and those seeds (None where a
        case declares none); a seed that is not an integer fails pre-checks, naming the case."""
        shapes, seeds = [], []
        for i, case in enumerate(cases):
            if not isinstance(case, dict):
                shapes.append(case)  # pre-checks says that shapes must be dicts
                seeds.append(None)
                continue
            try:
                shape, seed = split_seed(case, f"{where}[{i}]")
            except ValueError as exc:
                raise RungFailure(str(exc)) from None
            shapes.append(shape)
            seeds.append(seed)
        return shapes, seeds

    @property
    def test_seeds(self) -> list[int | None]:
        """Each test case's own seed, None where it declares none: one per entry of ``tests``."""
        return (self.own_test_seeds + [None] * len(self.tests))[: len(self.tests)]

    @property
    def declared_seeds(self) -> list[int]:
        """The seeds fresh ones are drawn around: the tests' own (the checks' meaning), else the
        benchmarks' (``seeds.ranges``)."""
        tests = [s for s in self.test_seeds if s is not None]
        return tests or [s for s in self.benchmark_seeds if s is not None]

    def read_fresh_shapes(self) -> None:
        """The reference's optional ``FRESH_SHAPES``: ``False`` or ``[]`` turns the rung off, a list
        of shape dicts replaces the derived shapes; anything else fails pre-checks, saying so."""

        rule = getattr(self.reference, FRESH_SHAPES, None)
        if rule is None:
            return
        if rule is False:
            self.own_fresh_shapes = []
        elif isinstance(rule, (list, tuple)) and all(isinstance(s, dict) for s in rule):
            self.own_fresh_shapes = self.split_cases(list(rule), FRESH_SHAPES)[0]  # fresh shapes: fresh seeds
        else:
            raise RungFailure(f"reference {self.reference_name}: {FRESH_SHAPES} must be False or a list of shape "
                              f"dicts like TESTS, got {type(rule).__name__}")

    # -- what every format provides -------------------------------------------------------------
    def generate(self, shape: dict, seed: int) -> tuple:
        raise NotImplementedError

    def describe_generate(self, shape: dict, seed: int) -> str:
        """How a failed input generation is named in its message."""
        return f"generate_input(seed={seed}, {shape_label(shape)})"

    @property
    def reference_call(self) -> str:
        """How a message names the reference's answer: ``ref_kernel``, ``Model.forward``."""
        return "ref_kernel"

    def ref_kernel(self, *inputs: Any) -> Any:
        raise NotImplementedError

    def custom_kernel(self, *inputs: Any) -> Any:
        raise NotImplementedError

    # -- what some formats refine ---------------------------------------------------------------
    def scope(self) -> ContextManager:
        """A context every call into the problem's code runs in (the CPU tier's device mapping)."""
        return contextlib.nullcontext()

    def poison_outputs(self, inputs: tuple) -> int:
        """Poison output buffers that arrive inside the inputs; returns how many were poisoned."""
        return 0

    def learn_output_slots(self, inputs: tuple, pristine: tuple, out: Any) -> str:
        """Recognise output buffers inside the inputs from what the candidate returned; returns a
        note naming any new ones (empty when there are none)."""
        return ""

    def watched_inputs(self, inputs: tuple) -> list:
        """The inputs a candidate must leave as they were (checked after every correctness call)."""
        return flatten(inputs)

    @property
    def has_check(self) -> bool:
        return False

    def check(self, inputs: tuple, output: Any) -> tuple[bool, str]:
        """The problem's own judgement of ``output`` for pristine ``inputs``: (passed, message)."""
        raise NotImplementedError


def misspelt(module: ModuleType, name: str) -> str | None:
    """The name ``module`` defines that is closest to ``name`` (``custom_kernal`` for
    ``custom_kernel``, ``TEST`` for ``TESTS``), whatever the case; None when none is close."""
    defined = {n.lower(): n for n in vars(module) if not n.startswith("__")}
    close = difflib.get_close_matches(name.lower(), list(defined), n=1, cutoff=0.8)
    return defined[close[0]] if close else None


def misspelt_note(module: ModuleType, missing: list[str]) -> str:
    """`` (it defines TEST: did you mean TESTS?)`` for each missing name with a close one, or ""."""
    guesses = [f"{found}: did you mean {name}?" for name in missing if (found := misspelt(module, name))]
    return f" (it defines {'; '.join(guesses)})" if guesses else ""
