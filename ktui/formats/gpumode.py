"""GPU MODE problems, run as they are: ``reference.py`` with ``generate_input(**shape, seed)``,
``ref_kernel(data)`` and ``check_implementation(data, output)``; shapes from ``task.yml``
(read by the parent, carried in ``Job.problem``); the candidate's ``custom_kernel(data)``.

In this format the output buffer often arrives inside ``data`` (``data = (a, b, c)``; the
reference writes ``c`` and returns it). ktui finds those buffers by running the reference once on
a private copy and seeing which returned tensors share memory with ``data``; before every
checked candidate call they are poisoned (NaN / an extreme integer), so unwritten elements fail,
and they are left out of the "inputs must not change" check.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch

from ktui.formats.base import Problem
from ktui.loop.device import clone_tree, cuda_mapped_to, describe, fill_poison
from ktui.loop.errors import RungFailure
from ktui.loop.outputs import flatten

Position = tuple  # a leaf's position inside ``data``: indices and keys from the top


class GpuModeProblem(Problem):
    format = "gpumode"

    def __init__(self, job, tier, candidate, reference, next_seed):
        super().__init__(job, tier, candidate, reference, next_seed)
        self.require(("generate_input", "ref_kernel"), callables=True)
        self.tests = list(job.problem.get("tests", []))
        self.benchmarks = list(job.problem.get("benchmarks", []))
        self._check = getattr(reference, "check_implementation", None)
        self._outputs: dict[tuple, list[Position]] = {}  # data layout → output buffer positions
        if job.problem.get("dropped_seeds"):
            self.notes.append("task.yml seeds replaced by fresh ones (--seed fixes them)")
        if not callable(self._check):
            self.notes.append("no check_implementation in reference.py: only ktui's metrics judge")
        if not tier.is_gpu:
            self.notes.append(f"CPU tier: tensors the problem's code puts on 'cuda' are made on '{tier.torch_device}'")

    def generate(self, shape: dict, seed: int) -> tuple:
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
            fill_poison(_get(inputs, path))
        return len(paths)

    def watched_inputs(self, inputs: tuple) -> list:
        outputs = set(self._output_paths(inputs))
        return [leaf for path, leaf in _leaves(inputs) if path not in outputs]

    def _output_paths(self, inputs: tuple) -> list[Position]:
        layout = tuple((path, tuple(leaf.shape), leaf.dtype) for path, leaf in _leaves(inputs))
        if layout not in self._outputs:
            probe = clone_tree(inputs)
            returned = [t for t in flatten(self.ref_kernel(*probe)) if isinstance(t, torch.Tensor)]
            self._outputs[layout] = [path for path, leaf in _leaves(probe) if any(_shares_memory(leaf, t) for t in returned)]
        return self._outputs[layout]

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


def _leaves(obj: Any, path: Position = ()) -> Iterator[tuple[Position, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from _leaves(item, (*path, i))
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield from _leaves(item, (*path, key))


def _get(obj: Any, path: Position) -> torch.Tensor:
    for step in path:
        obj = obj[step]
    return obj


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


PROBLEM = GpuModeProblem
