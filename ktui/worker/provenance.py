"""Where a returned output came from: the module's kernels, or torch.

Launch counting proves that one of the module's kernels ran, not that it produced the answer: a
kernel can launch a token kernel on one row and return what torch (or a private copy of the
reference) computed. Two properties close that gap:

- *provenance*, checked on every checked call: the returned output's storage was handed to one of
  the module's own Triton launches or CuTeDSL functions in that call, and torch neither made that
  storage by computing (``torch.softmax(x)``) nor wrote values into it (``out.copy_(answer)``,
  ``out[:] = answer``, ``torch.add(x, y, out=out)``). Allocations and constant fills
  (``torch.empty``, ``zeros``, ``fill_``, ``zero_``) are not computations and are allowed. Torch's
  side is read from the dispatcher (a ``TorchDispatchMode``), so it does not matter what the
  candidate looks at: only what torch actually did to the storage counts.
- *dependence* (the ``dependence`` rung, ``dependence.py``): with the module's kernels turned into
  no-ops, the answer is no longer right.

What this cannot see: writes that bypass torch's dispatcher (numpy views of CPU tensors, ctypes,
another library's copy), and a kernel that copies an answer computed elsewhere — the kernel did
write the output then. The table of tricks in docs/verdicts.md says so.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ktui.worker.tier import storage_key, storage_span, tensors_in

# Ops that allocate or fill with constants (or noise): no answer can come from them.
ALLOCATIONS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full",
    "scalar_tensor", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm",
})
CONSTANT_FILLS = frozenset({"fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_"})

_state = threading.local()


@contextlib.contextmanager
def inside_launch() -> Iterator[None]:
    """Marks a launch of the module's own kernel: what torch does in there (Triton's interpreter
    copies its arguments in and out with torch ops) is the kernel's work, not torch's."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def _in_launch() -> bool:
    return getattr(_state, "depth", 0) > 0


@dataclass
class Origin:
    """What torch did to one storage during the call."""

    made_by: str | None = None  # the computing op that made it (None: an allocation, or older)
    written_by: str | None = None  # the first op that wrote computed values into it


class StorageLedger(TorchDispatchMode):
    """Records, per storage, which torch op made it and which wrote into it, outside kernel launches."""

    def __init__(self) -> None:
        super().__init__()
        self.origins: dict[int, Origin] = {}

    def record(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if not _in_launch():
            self._note(func, args, kwargs, result)
        return result

    def _note(self, func, args, kwargs, result) -> None:
        schema = func._schema
        name = schema.name.split("::")[-1]
        for i, argument in enumerate(schema.arguments):
            alias = argument.alias_info
            if alias is None or not alias.is_write or name in CONSTANT_FILLS:
                continue
            value = args[i] if i < len(args) else kwargs.get(argument.name)
            for t in tensors_in(value):
                key = storage_key(t)
                if key is not None:
                    origin = self.origins.setdefault(key, Origin())
                    origin.written_by = origin.written_by or f"aten.{name}"
        returns = list(result) if isinstance(result, (tuple, list)) else [result]
        for declared, value in zip(schema.returns, returns):
            if declared.alias_info is not None:
                continue  # a view, or the mutated argument handed back
            for t in tensors_in(value):
                key = storage_key(t)
                if key is not None:  # a fresh storage: whatever was recorded at this address is gone
                    self.origins[key] = Origin(made_by=None if name in ALLOCATIONS else f"aten.{name}")


def _dispatch(self: StorageLedger, func, types, args=(), kwargs=None):
    if "torch._dynamo" in sys.modules:  # someone may compile: keep Dynamo out of this frame, as torch would
        return _record_outside_dynamo()(self, func, types, args, kwargs)
    return self.record(func, types, args, kwargs)


@functools.cache
def _record_outside_dynamo():
    return torch._disable_dynamo(StorageLedger.record, recursive=True)


# Set after the class is made: ``TorchDispatchMode`` wraps a subclass's own ``__torch_dispatch__``
# in ``torch._disable_dynamo``, whose first call imports all of ``torch._dynamo`` (seconds in a cold
# worker) even when nothing is compiled. Where Dynamo is not loaded nothing can be compiling.
StorageLedger.__torch_dispatch__ = _dispatch


@dataclass
class Received:
    """The memory the module's kernels were handed during one call."""

    spans: list[tuple[int, int]] = field(default_factory=list)  # torch tensors: their whole storage
    pointers: list[int] = field(default_factory=list)  # CuTeDSL tensors: their data pointer

    def add(self, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            span = storage_span(value)
            if span:
                self.spans.append(span)
        elif isinstance(value, (tuple, list)):
            for item in value:
                self.add(item)
        elif isinstance(value, dict):
            for item in value.values():
                self.add(item)
        elif isinstance(getattr(value, "base", None), torch.Tensor):
            # A host-side TMA descriptor (Triton's ``TensorDescriptor``): the kernel reads and
            # writes the tensor it describes.
            self.add(value.base)
        elif callable(getattr(value, "data_ptr", None)):
            with contextlib.suppress(Exception):
                pointer = int(value.data_ptr())
                if pointer:
                    self.pointers.append(pointer)

    def holds(self, t: torch.Tensor) -> bool:
        span = storage_span(t)
        if span is None:
            return False
        lo, hi = span
        return any(a < hi and lo < b for a, b in self.spans) or any(lo <= p < hi for p in self.pointers)


def judge(outputs: list[torch.Tensor], received: Received, ledger: StorageLedger,
          earlier: set[int] = frozenset()) -> str | None:
    """Why an output's values did not come from the module's kernels, or None when they did.

    ``earlier``: the storages that earlier calls returned, to name a replayed buffer for what it is."""
    for i, out in enumerate(outputs):
        name = "the output" if len(outputs) == 1 else f"output {i}"
        if out.numel() == 0:
            continue
        origin = ledger.origins.get(storage_key(out) or -1, Origin())
        if origin.made_by:
            return (f"{name} was computed by torch ({origin.made_by}), not by the module's kernels: allocate it "
                    "(torch.empty…) and have a kernel write it; a final torch step (a cast, a reshape copy, an "
                    "epilogue) belongs inside the kernel")
        if origin.written_by:
            return (f"torch wrote values into {name} ({origin.written_by}): its contents came from torch, not "
                    "from the module's kernels; have a kernel write the result (zero_/fill_ of the buffer are fine)")
        if not received.holds(out):
            if storage_key(out) in earlier and storage_key(out) not in ledger.origins:
                return (f"{name} is the very buffer an earlier call returned, and no kernel of the module wrote "
                        "it in this call: a cached answer, not a computed one")
            return (f"{name} was never handed to the module's kernels in this call: its values came from "
                    "elsewhere (torch, a cache, the reference); return a buffer that a kernel wrote")
    return None
