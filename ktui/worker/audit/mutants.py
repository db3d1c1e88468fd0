"""Trivial candidates a good test rejects, built from a draw's inputs and right answer.

Each mutant is what a lazy or broken kernel returns: zeros; ones; its output buffer unwritten
(ktui's poison); a copy of one of its inputs (where the shape and dtype fit); the right answer
rounded through bfloat16 or float16 (a float32 output computed in low precision); one constant,
the answer's mean; the first half right and the rest zero; the answer transposed, or rolled by one
along its last dimension; the previous call's answer replayed on new inputs. ``build`` returns
``None`` where a mutant does not apply to this draw, or would be the answer whatever its values (no
input fits; a 1-D output has no transpose; one element has no second half).

Every mutant is judged like a real kernel's output (``ktui.worker.judgement.judge``), never run as a
kernel: the launch and provenance checks that would unmask it at once are not what is tested here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import torch

from ktui.worker.audit.draws import Draw, spread_of
from ktui.worker.audit.results import CAUGHT, NOT_APPLICABLE, PASSES, SAME, Judged
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure
from ktui.worker.judgement import judge
from ktui.worker.leaves import leaf_at
from ktui.worker.outputs import flatten
from ktui.worker.tier import clone_tree, fill_poison, same_values, tensors_in


def judge_candidate(ctx: RunContext, inputs: tuple, ref: Any, out: Any) -> Judged:
    """``out`` as the answer for ``inputs`` (right answer ``ref``), judged as correctness judges a
    kernel's output: paired with the reference's, ktui's metrics and the problem's own check, and
    unwritten (poisoned) elements fail whatever the judges say."""
    if out is None:
        return Judged(NOT_APPLICABLE)
    if is_right_answer(out, ref):
        return Judged(SAME)
    try:
        return judge_output(ctx, inputs, ref, out)
    except RungFailure as failure:
        return Judged(CAUGHT, failure.message)
    except Exception as exc:
        if not ctx.problem.has_check:
            raise
        # the problem's check raised on this output: it rejected it (its own answer passed)
        return Judged(CAUGHT, f"check_implementation raised {type(exc).__name__}: {exc}")


def judge_output(ctx: RunContext, inputs: tuple, ref: Any, out: Any) -> Judged:
    """The judgement itself; what the problem's check raises goes to the caller."""
    pairs = ctx.pair(out, ref)
    pristine = clone_tree(inputs) if ctx.problem.has_check else inputs  # the check may write into it
    verdict = judge(ctx, pristine, out, pairs, mapped=False)  # a mutant is meant to be wrong: where is no question
    if verdict.unwritten:
        return Judged(CAUGHT, f"{verdict.unwritten} element(s) still hold ktui's poison")
    if not verdict.passed:
        return Judged(CAUGHT, verdict.reason)
    return Judged(PASSES, "; ".join(verdict.notes))


@dataclass(frozen=True)
class Mutant:
    key: str  # stable across shapes: the rung is ``mutant[<key>]``
    title: str  # how a sentence names the kernel: "a kernel that returns <title>"
    build: Callable[[Draw], Any]
    not_applicable: str = ""  # why it never applies, when it never does


def is_fast(mutant: Mutant) -> bool:
    """The mutants ``ktui run`` tries on a reference version it has never audited: the trivial
    answers a weak test most often lets through (zeros, a copy of an input, one constant)."""
    return mutant.key in ("zeros", "mean") or mutant.key.startswith("copy of ")


def mutants_for(draw: Draw) -> list[Mutant]:
    copies = [Mutant(f"copy of {name}", f"a copy of {name}", partial(_copy, path),
                     f"no output has the shape and dtype of {name}")
              for path, name in draw.leaves]
    return [
        Mutant("zeros", "zeros", lambda d: _each(d.ref_b, torch.zeros_like)),
        Mutant("ones", "ones", lambda d: _each(d.ref_b, torch.ones_like)),
        Mutant("unwritten", "its output buffer unwritten (ktui's poison)",
               lambda d: _each(d.ref_b, lambda r: fill_poison(torch.empty_like(r)))),
        *copies,
        Mutant("bf16", "the answer rounded through bfloat16", partial(_rounded, torch.bfloat16),
               "no float32 output"),
        Mutant("fp16", "the answer rounded through float16", partial(_rounded, torch.float16), "no float32 output"),
        Mutant("mean", "one constant, the answer's mean", lambda d: _each(d.ref_b, _mean), "no output to average"),
        Mutant("half", "the first half of the answer and zeros after it", lambda d: _each(d.ref_b, _half)),
        Mutant("transposed", "the answer transposed (its last two dimensions swapped)",
               lambda d: _each(d.ref_b, _transposed), "no output has two dimensions"),
        Mutant("rolled", "the answer rolled by one along its last dimension", lambda d: _each(d.ref_b, _rolled),
               "no output has a last dimension longer than 1"),
        Mutant("replay", "the previous call's answer, replayed on new inputs", _replay),
    ]


def _each(ref: Any, fn: Callable[[torch.Tensor], torch.Tensor | None]) -> Any:
    """``fn`` applied to every output tensor, in the reference's structure; outputs ``fn`` does
    not apply to stay right; ``None`` when it applies to none."""
    if isinstance(ref, torch.Tensor):
        return fn(ref)
    if not isinstance(ref, (tuple, list)):
        return None
    built = [fn(r) if isinstance(r, torch.Tensor) else None for r in ref]
    if all(b is None for b in built):
        return None
    items = [b if b is not None else (r.clone() if isinstance(r, torch.Tensor) else r) for b, r in zip(built, ref)]
    return tuple(items) if isinstance(ref, tuple) else items


def _copy(path: tuple, d: Draw) -> Any:
    source = leaf_at(d.inputs_b, path)
    return _each(d.ref_b, lambda r: source.clone() if source.shape == r.shape and source.dtype == r.dtype else None)


def _rounded(dtype: torch.dtype, d: Draw) -> Any:
    return _each(d.ref_b, lambda r: r.to(dtype).to(r.dtype) if r.dtype == torch.float32 else None)


def _mean(r: torch.Tensor) -> torch.Tensor | None:
    if r.numel() < 2:  # the mean of one number is that number
        return None
    values = spread_of(r)
    mean = values.mean if values is not None else 0.0
    if r.dtype == torch.bool:
        return torch.full_like(r, mean >= 0.5)
    return torch.full_like(r, mean if r.dtype.is_floating_point or r.dtype.is_complex else round(mean))


def _half(r: torch.Tensor) -> torch.Tensor | None:
    if r.numel() < 2:
        return None
    flat = r.clone().reshape(-1)
    flat[flat.numel() - flat.numel() // 2:] = 0
    return flat.reshape(r.shape)


def _transposed(r: torch.Tensor) -> torch.Tensor | None:
    if r.dim() < 2 or min(r.shape[-2:]) < 2:  # a row or a column: transposed, it is laid out the same
        return None
    return r.transpose(-2, -1).contiguous().reshape(r.shape)


def _rolled(r: torch.Tensor) -> torch.Tensor | None:
    if r.dim() < 1 or r.shape[-1] < 2:
        return None
    return torch.roll(r, 1, dims=-1)


def _replay(d: Draw) -> Any:
    previous, now = flatten(d.ref_a), flatten(d.ref_b)
    if len(previous) != len(now) or not all(
        isinstance(p, torch.Tensor) and isinstance(n, torch.Tensor) and p.shape == n.shape and p.dtype == n.dtype
        for p, n in zip(previous, now)
    ):
        return None
    return _each(d.ref_a, torch.Tensor.clone)


def is_right_answer(out: Any, ref: Any) -> bool:
    """The mutant is the right answer itself here (a copy of inputs that are never negative, for a
    ReLU; the mean of a constant): whatever the tolerance, it passes."""
    return bool(tensors_in(out)) and same_values(out, ref)
