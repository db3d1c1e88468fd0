"""GPU MODE problems, run as they are: ``reference.py`` with ``generate_input(**shape, seed)``,
``ref_kernel(data)`` and ``check_implementation(data, output)``; shapes from ``task.yml``
(read by the parent, carried in ``Job.problem``), each case's ``seed`` taken out of its shape and
kept as the problem's own (``ktui.worker.seeds``); the candidate's ``custom_kernel(data)``.

In this format the output buffer often arrives inside ``data`` (``data = (a, b, c)``), and honest
submissions write their result into it, whether the reference writes it (``output[...] = …``) or
returns a new tensor (``return a @ b``). A tensor in ``data`` is an *output slot* when

- ``generate_input`` left it unwritten (allocated with ``torch.empty`` and never filled: it holds
  no data, so nothing can read it as an input), or
- ``ref_kernel`` writes it or returns it, or
- the candidate returns it (or a view of it) and the reference ignores what it holds.

The first two are found before anything runs, from one probe of the first test shape, and named in
the pre-checks message; the third when the candidate first returns such a buffer. Output slots are
poisoned before every checked call (unwritten elements fail) and may be written; every other
tensor in ``data`` is an input and must be left as it was.
"""

from __future__ import annotations

from typing import Any

import torch

from ktui.worker.errors import RungFailure
from ktui.worker.formats.base import Problem
from ktui.worker.leaves import Position, data_path, leaf_at, tree_leaves
from ktui.worker.outputs import flatten
from ktui.worker.tier import (
    clone_tree,
    cuda_mapped_to,
    describe,
    fill_poison,
    holds_only_poison,
    poisoned_allocations,
    same_values,
    shares_storage,
)


class GpuModeProblem(Problem):
    format = "gpumode"

    def __init__(self, job, tier, candidate, reference, next_seed):
        super().__init__(job, tier, candidate, reference, next_seed)
        self.require(("generate_input", "ref_kernel"), callables=True)
        self.declared_by = "task.yml"
        self.tests, self.own_test_seeds = self.split_cases(list(job.problem.get("tests", [])), "task.yml: tests")
        self.benchmarks, self.benchmark_seeds = self.split_cases(list(job.problem.get("benchmarks", [])),
                                                                 "task.yml: benchmarks")
        self.read_fresh_shapes()
        self._check = getattr(reference, "check_implementation", None)
        self._slots: dict[Position, str] | None = None  # output slot → how it was recognised
        if not callable(self._check):
            self.notes.append("no check_implementation in reference.py: only ktui's metrics judge")
        if not tier.is_gpu:
            self.notes.append(f"CPU tier: tensors the problem's code puts on 'cuda' are made on '{tier.torch_device}'")
        if self.tests:  # probed on the problem's own first input where it declares one
            first = self.test_seeds[0]
            self.notes.append(self._probe_slots(self.tests[0], first if first is not None else next_seed()))

    def _probe_slots(self, shape: dict, seed: int) -> str:
        """Find the output slots from one input of ``shape``; say what was found, for pre-checks."""
        try:
            with self.scope():
                self._find_slots(self.generate(shape, seed))
        except Exception as exc:
            self._slots = None
            return f"output slots in data not probed ({self.describe_generate(shape, seed)} raised {type(exc).__name__})"
        if not self._slots:
            return "no output slot in data: every tensor in it is an input"
        found = ", ".join(f"data{data_path(path)} ({how})" for path, how in self._slots.items())
        return f"output slot(s) in data: {found}"

    def generate(self, shape: dict, seed: int) -> tuple:
        # Allocations poisoned: a buffer generate_input leaves unwritten is recognisably empty.
        with poisoned_allocations():
            return (self.reference.generate_input(**shape, seed=seed),)

    def describe_generate(self, shape: dict, seed: int) -> str:
        args = ", ".join([*(f"{k}={v!r}" for k, v in shape.items()), f"seed={seed}"])
        return f"generate_input({args})"

    def ref_kernel(self, *inputs: Any) -> Any:
        return self.reference.ref_kernel(*inputs)

    def custom_kernel(self, *inputs: Any) -> Any:
        return self.candidate.custom_kernel(*inputs)

    def scope(self):
        if self.tier.is_gpu:
            return super().scope()
        return cuda_mapped_to(self.tier.torch_device)

    # -- output buffers inside data -------------------------------------------------------------
    def poison_outputs(self, inputs: tuple) -> int:
        paths = self._output_paths(inputs)
        for path in paths:
            fill_poison(leaf_at(inputs, path))
        return len(paths)

    def watched_inputs(self, inputs: tuple) -> list:
        outputs = set(self._output_paths(inputs))
        return [leaf for path, leaf in tree_leaves(inputs) if path not in outputs]

    def learn_output_slots(self, inputs: tuple, pristine: tuple, out: Any) -> str:
        """Recognise a buffer of ``data`` the candidate returns as an output slot when the reference
        ignores what it holds (its answer is the same with the buffer poisoned)."""
        returned = [t for t in flatten(out) if isinstance(t, torch.Tensor)]
        known = set(self._output_paths(inputs))
        learned = []
        for path, leaf in tree_leaves(inputs):
            if path in known or not any(shares_storage(leaf, t) for t in returned):
                continue
            if self._reference_ignores(pristine, path):
                self._slots[path] = "returned by custom_kernel; ref_kernel ignores what it holds"
                learned.append(f"data{data_path(path)}")
        return f"output slot(s) in data: {', '.join(learned)} (returned by custom_kernel; ref_kernel ignores what they hold)" if learned else ""

    def _reference_ignores(self, pristine: tuple, path: Position) -> bool:
        plain = self.ref_kernel(*clone_tree(pristine))
        probe = clone_tree(pristine)
        fill_poison(leaf_at(probe, path))
        poisoned = self.ref_kernel(*probe)
        return same_values(plain, poisoned)

    def _output_paths(self, inputs: tuple) -> list[Position]:
        if self._slots is None:
            self._find_slots(inputs)
        return list(self._slots)

    def _find_slots(self, inputs: tuple) -> None:
        slots: dict[Position, str] = {}
        for path, leaf in tree_leaves(inputs):
            if holds_only_poison(leaf):
                slots[path] = "left unwritten by generate_input"
        probe = clone_tree(inputs)
        before = clone_tree(probe)
        returned = [t for t in flatten(self.ref_kernel(*probe)) if isinstance(t, torch.Tensor)]
        for (path, leaf), (_, old) in zip(tree_leaves(probe), tree_leaves(before)):
            if path in slots:
                continue
            if any(shares_storage(leaf, t) for t in returned):
                slots[path] = "returned by ref_kernel"
            elif not same_values(leaf, old):
                slots[path] = "written by ref_kernel"
        self._slots = slots

    # -- the problem's own check ----------------------------------------------------------------
    @property
    def has_check(self) -> bool:
        return callable(self._check)

    def check(self, inputs: tuple, output: Any) -> tuple[bool, str]:
        return check_result(self._check(*inputs, output))


def check_result(result: Any) -> tuple[bool, str]:
    """Read what ``check_implementation`` returned, in each form GPU MODE problems use.

    ``(ok, message)`` (current problems); a string, empty when it passed and the reason when it
    did not (earlier problems); a bool. Anything else is not a verdict, and says so.
    """
    if isinstance(result, (tuple, list)) and len(result) == 2 and _as_bool(result[0]) is not None:
        message = result[1] if isinstance(result[1], str) else repr(result[1])
        return _as_bool(result[0]), message
    if isinstance(result, str):
        return result == "", result
    if _as_bool(result) is not None:
        ok = _as_bool(result)
        return ok, "" if ok else "check_implementation returned False"
    raise RungFailure(
        f"check_implementation returned {describe(result) if result is not None else 'None'}: expected "
        "(ok, message), a message string (empty when it passed) or a bool"
    )


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":  # numpy.bool_
        return bool(value)
    if isinstance(value, torch.Tensor) and value.dtype == torch.bool and value.numel() == 1:
        return bool(value)
    return None


PROBLEM = GpuModeProblem
