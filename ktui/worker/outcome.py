"""The worker's value types: what a rung returns, what compile produced, how a shape is named.

A leaf: every module of the worker may import it, and it imports nothing of ktui, so no two
modules of the worker need each other to name a result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CompiledFunction:
    """One GPU function the compile rung produced, whatever DSL it came from."""

    dsl: str  # its DSL's name (``ktui.protocol.dsls``): "triton", "cutedsl", "tilelang"…
    name: str  # the GPU function's symbol, as in the PTX/CUBIN
    source_fn: str  # the user's Python function
    artifacts: dict[str, str | bytes]  # extension → content: ttir, ttgir, llir, mlir, ptx, cubin
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Outcome:
    """What a rung returns when it did not raise: its figures and a one-line note."""

    figures: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    status: str = "ok"


class ReferenceFault(Exception):
    """The reference's own code raised (its input generator, ``ref_kernel``) or made no inputs: the
    reference is at fault, not the kernel, and the run cannot judge it (the rung's status and the
    run's verdict are ``error``)."""


class InputGenerationError(ReferenceFault):
    """The reference's input generator raised or returned no tensor."""


def shape_label(shape: dict) -> str:
    """``{"rows": 128, "cols": 1000}`` → ``rows=128,cols=1000`` (the rung's bracketed name);
    ``{}`` (a problem with one fixed size, like KernelBench's) → ``default``."""
    return ",".join(f"{k}={v}" for k, v in shape.items()) or "default"


def shape_key(shape: dict) -> str:
    """One text per shape, whatever the order of its keys: to tell shapes apart in sets and maps."""
    return json.dumps(shape, sort_keys=True, default=str)
