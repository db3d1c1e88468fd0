"""Rung ``integrity``: the replay probe, new data in the same buffers must give the new answer.

Call the kernel on inputs A, then write fresh inputs B into A's very tensors (same pointers, same
shapes) and call it again. An honest kernel returns the answer for B; one that cached its result
by pointer, shape or call returns A's answer again. The checks every call of the candidate goes
through (the harness guard, launch counting, the sealed inputs) are ``ktui.worker.integrity``'s.
"""

from __future__ import annotations

import torch

from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure, RungSkipped
from ktui.worker.integrity import PRIVATE_INPUTS
from ktui.worker.judgement import judge
from ktui.worker.outcome import Outcome
from ktui.worker.tier import clone_tree, synchronize, tensors_in


def same_storage_replay(inputs: tuple, fresh: tuple) -> None:
    """Write ``fresh``'s values into ``inputs``' tensors in place: same pointers, new data."""
    for dst, src in zip(tensors_in(inputs), tensors_in(fresh)):
        dst.copy_(src)


def run(ctx: RunContext) -> Outcome:
    shape = ctx.tests[min(1, len(ctx.tests) - 1)]
    if ctx.fresh_seeds.choices < 2:
        raise RungSkipped(f"one seed keeps the problem's inputs what they are ({ctx.fresh_seeds.text()}): "
                          "no second input to write into the same buffers")
    first_seed = second_seed = ctx.next_seed()
    while second_seed == first_seed:  # two inputs that differ: the same one twice proves nothing
        second_seed = ctx.next_seed()
    inputs = ctx.generate(shape, first_seed)
    first = clone_tree(ctx.candidate(*inputs))
    synchronize(ctx.tier)
    fresh = ctx.generate(shape, second_seed)
    same_storage_replay(inputs, fresh)
    second = ctx.candidate(*inputs, kept={PRIVATE_INPUTS: fresh, "the harness's copy of the first call's output": first})
    synchronize(ctx.tier)
    del inputs  # the candidate's buffers: ``second`` keeps what it returned
    ref = ctx.ref_kernel(*fresh)  # ``fresh`` is private: nothing else reads it but the judgement below
    pairs = ctx.pair(second, ref)
    figures = {"shape": shape, "seeds": [first_seed, second_seed]}
    verdict = judge(ctx, fresh, second, pairs)
    figures.update(verdict.map_figures())
    if not verdict.passed:
        if any(out.shape == previous.shape and torch.equal(out, previous) for (out, _), previous in zip(pairs, tensors_in(first))):
            raise RungFailure(
                "new data in the same buffers gave the previous call's result: the kernel returns a cached "
                "answer (keyed on pointers, shapes or calls) instead of computing",
                figures,
                status="suspicious",
            )
        raise RungFailure(f"wrong when called again on new data in the same buffers: {verdict.reason}", figures)
    return Outcome(figures=figures, message="fresh data in reused buffers gave the fresh answer")
