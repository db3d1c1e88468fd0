"""What the audit knows of one test shape: inputs from two fresh seeds and the reference's answers.

Seed ``a`` is drawn twice (are the inputs and the answer reproducible?), seed ``b`` once (do they
change with the seed?); the mutants are judged on ``b``'s inputs, and the previous call's answer
a replaying kernel would return is ``a``'s. Where the shape's case declares a seed, ``declared``
makes the same draw with that seed as ``b``: the mutants are judged on the author's inputs too. The reference always runs on a private copy: a GPU MODE
reference writes into the output buffer it finds in ``data``.

A reference that raises, returns no tensors or returns nothing stops the audit with an
``AuditError`` that names the user's file and line, as ``ktui run`` would.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from ktui.protocol.events import ErrorInfo
from ktui.protocol.job import KERNELBENCH
from ktui.worker.context import RunContext
from ktui.worker.errors import error_info, location
from ktui.worker.leaves import Position, input_leaves
from ktui.worker.metrics import compare, flat_chunks
from ktui.worker.outcome import InputGenerationError, ReferenceFault
from ktui.worker.outputs import flatten
from ktui.worker.tier import clone_tree, same_values, synchronize, tensors_in


class AuditError(Exception):
    """The reference cannot be audited (it raised, returned nothing…): the message says where."""

    def __init__(self, message: str, error: ErrorInfo | None = None):
        super().__init__(message)
        self.message = message
        self.error = error


@dataclass
class Draw:
    shape: dict
    label: str
    seed_a: int
    seed_b: int
    inputs_a: tuple
    ref_a: Any
    inputs_b: tuple  # what the mutants are judged on
    ref_b: Any  # the right answer for ``inputs_b``
    inputs_reproducible: bool  # seed ``a`` drawn again gave the same inputs
    answer_repeat: dict = field(default_factory=dict)  # the reference run twice on ``inputs_a``
    leaves: list[tuple[Position, str]] = field(default_factory=list)  # the inputs (output buffers left out)


def draw(ctx: RunContext, shape: dict, label: str) -> Draw:
    seed_a, seed_b = ctx.next_seed(), ctx.next_seed()
    inputs_a = generate(ctx, shape, seed_a)
    again = generate(ctx, shape, seed_a)
    reproducible = same_values(inputs_a, again)
    del again
    ref_a = reference(ctx, inputs_a, label, seed_a)
    repeat = answer_difference(ctx, ref_a, reference(ctx, inputs_a, label, seed_a))
    inputs_b = generate(ctx, shape, seed_b)
    ref_b = reference(ctx, inputs_b, label, seed_b)
    leaves = [(path, name) for path, name, _ in input_leaves(inputs_b, ctx.watched_inputs(inputs_b), ctx.job.format)]
    return Draw(shape, label, seed_a, seed_b, inputs_a, ref_a, inputs_b, ref_b, reproducible, repeat, leaves)


def declared(ctx: RunContext, draw: Draw, seed: int) -> Draw:
    """``draw`` with its ``b`` side made from the problem's own ``seed``: what the mutants are judged
    on where the problem's author chose the inputs (the replayed answer is still ``a``'s)."""
    inputs = generate(ctx, draw.shape, seed)
    return replace(draw, seed_b=seed, inputs_b=inputs, ref_b=reference(ctx, inputs, draw.label, seed))


def generate(ctx: RunContext, shape: dict, seed: int) -> tuple:
    try:
        inputs = ctx.generate(shape, seed)
    except InputGenerationError as exc:
        cause = exc.__cause__
        info = error_info(cause, ctx.user_files) if cause is not None else _at_definition(ctx, "generate", exc)
        raise AuditError(_located(str(exc), info), info) from None
    synchronize(ctx.tier)
    return inputs


def reference(ctx: RunContext, inputs: tuple, label: str, seed: int) -> Any:
    """The reference's answer for a private copy of ``inputs``."""
    name = ctx.problem.reference_call
    try:
        out = ctx.ref_kernel(*clone_tree(inputs))
        synchronize(ctx.tier)
    except Exception as exc:
        info = error_info(exc.__cause__ if isinstance(exc, ReferenceFault) and exc.__cause__ else exc, ctx.user_files)
        raise AuditError(_located(f"{name} raised on {label} (seed {seed}): {info.type}: {info.message}", info),
                         info) from None
    if not tensors_in(out):
        what = "None" if out is None else type(out).__name__
        problem = AuditError(f"{name} returned {what} on {label}: it must return its output tensor(s)")
        info = _at_definition(ctx, "reference", problem)
        raise AuditError(_located(problem.message, info), info)
    return out


def answer_difference(ctx: RunContext, first: Any, second: Any) -> dict:
    """How two answers to the same inputs differ: ``identical``, or the largest difference and
    whether ktui's tolerance covers it."""
    if same_values(first, second):
        return {"identical": True}
    worst, within = 0.0, True
    for a, b in zip(flatten(first), flatten(second)):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
            return {"identical": False, "within_tolerance": False, "max_abs": float("inf")}
        result = compare(b, a, ctx.tolerances)
        worst = max(worst, float(result.figures.get("max_abs", 0.0)))
        within = within and result.passed
    return {"identical": False, "within_tolerance": within, "max_abs": worst}


@dataclass(frozen=True)
class Spread:
    """A tensor's finite values in figures: how many, smallest, largest, mean, mean magnitude."""

    count: int
    low: float
    high: float
    mean: float
    mean_magnitude: float

    @property
    def top(self) -> float:
        return max(abs(self.low), abs(self.high))


def spread_of(t: torch.Tensor) -> Spread | None:
    """``t``'s finite values summed up one chunk at a time in float64 (a 6 GB output needs no 12 GB
    copy); None when it holds none, or is complex."""
    if t.dtype.is_complex:
        return None
    count, low, high, total, magnitude = 0, float("inf"), float("-inf"), 0.0, 0.0
    for _, piece in flat_chunks(t.detach()):
        values = piece.to(torch.float64)
        if t.dtype.is_floating_point:
            values = values[torch.isfinite(values)]
        if not values.numel():
            continue
        count += values.numel()
        low, high = min(low, float(values.min())), max(high, float(values.max()))
        total += float(values.sum())
        magnitude += float(values.abs().sum())
    return Spread(count, low, high, total / count, magnitude / count) if count else None


# -- where the user's code is ---------------------------------------------------------------------
def _at_definition(ctx: RunContext, role: str, exc: BaseException) -> ErrorInfo:
    """An error in what a function returned, placed at that function's ``def``."""
    fn = _user_function(ctx, role)
    loc = None
    try:
        file = inspect.getsourcefile(fn) if fn is not None else None
        line = fn.__code__.co_firstlineno if fn is not None else None
    except TypeError:
        file = line = None
    if file and line:
        loc = location(file, line)
    return ErrorInfo(type=type(exc).__name__, message=str(exc), location=loc)


def _user_function(ctx: RunContext, role: str):
    module = ctx.reference
    if ctx.job.format == KERNELBENCH:
        fn = getattr(module, "get_inputs", None) if role == "generate" else getattr(getattr(module, "Model", None), "forward", None)
    else:
        fn = getattr(module, "generate_input" if role == "generate" else "ref_kernel", None)
    return inspect.unwrap(fn) if callable(fn) and hasattr(fn, "__code__") else None


def _located(message: str, info: ErrorInfo | None) -> str:
    """``badgen.py:11: <message>`` when the user's line is known."""
    loc = info.location if info is not None else None
    return f"{Path(loc.file).name}:{loc.line}: {message}" if loc is not None else message
