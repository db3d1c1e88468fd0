"""The one interface the rungs call, whatever the problem's format (worker side).

``inputs`` is always a tuple the candidate is called with as ``*inputs``: ktui's own contract
passes several tensors, GPU MODE one ``data`` object (so ``inputs == (data,)``), KernelBench the
list ``get_inputs()`` returns. Everything a format does differently lives in its subclass.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, ContextManager

from ktui.protocol.job import Job
from ktui.worker.errors import RungFailure
from ktui.worker.outcome import shape_label
from ktui.worker.outputs import flatten
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

    def require(self, names: tuple[str, ...], what: str = "reference", callables: bool = False) -> None:
        """Fail pre-checks naming every contract name the reference module lacks."""

        present = (lambda n: callable(getattr(self.reference, n, None))) if callables else \
            (lambda n: hasattr(self.reference, n))
        missing = [n for n in names if not present(n)]
        if missing:
            raise RungFailure(f"{what} {self.reference_name} lacks {', '.join(missing)}")

    def read_fresh_shapes(self) -> None:
        """The reference's optional ``FRESH_SHAPES``: ``False`` or ``[]`` turns the rung off, a list
        of shape dicts replaces the derived shapes; anything else fails pre-checks, saying so."""

        rule = getattr(self.reference, FRESH_SHAPES, None)
        if rule is None:
            return
        if rule is False:
            self.own_fresh_shapes = []
        elif isinstance(rule, (list, tuple)) and all(isinstance(s, dict) for s in rule):
            self.own_fresh_shapes = list(rule)
        else:
            raise RungFailure(f"reference {self.reference_name}: {FRESH_SHAPES} must be False or a list of shape "
                              f"dicts like TESTS, got {type(rule).__name__}")

    # -- what every format provides -------------------------------------------------------------
    def generate(self, shape: dict, seed: int) -> tuple:
        raise NotImplementedError

    def describe_generate(self, shape: dict, seed: int) -> str:
        """How a failed input generation is named in its message."""
        return f"generate_input(seed={seed}, {shape_label(shape)})"

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
