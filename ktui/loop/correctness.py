"""Rung 4, ``correctness[<shape>]``: one per entry of the reference's ``TESTS``.

Each shape gets fresh inputs from a new seed. The candidate runs first, with every ``torch.empty``
it makes poisoned, and any output buffer passed in its inputs poisoned too (so unwritten output
fails), on inputs the reference never sees; the reference
then runs on a private copy. The inputs are checked for mutation, and every output is compared
with the metrics of ``ktui.metrics``.
"""

from __future__ import annotations

import torch

from ktui.loop.context import Outcome, RunContext
from ktui.loop.device import clone_tree, synchronize, unwritten
from ktui.loop.errors import RungFailure
from ktui.loop.outputs import pair_outputs
from ktui.metrics import compare

HEADLINE = ("max_abs", "max_rel", "mse", "rmse", "psnr", "cossim", "worst_index", "mismatched", "nonfinite")


STRICT_SEEDS = 3  # fresh inputs per shape in --strict mode


def run(ctx: RunContext, shape: dict) -> Outcome:
    seeds = STRICT_SEEDS if ctx.job.options.strict else 1
    outcome = Outcome()
    for _ in range(seeds):
        outcome = check_once(ctx, shape)
    if seeds > 1:
        outcome.figures["seeds"] = ctx.seeds_used[-seeds:]
    return outcome


def check_once(ctx: RunContext, shape: dict) -> Outcome:
    call = ctx.poisoned_call(shape)
    seed, inputs, pristine, out = call.seed, call.inputs, call.pristine, call.out
    mutated = _mutated_inputs(ctx.watched_inputs(inputs), ctx.watched_inputs(pristine))
    ref = ctx.ref_kernel(*clone_tree(pristine))
    synchronize(ctx.tier)
    pairs = pair_outputs(out, ref, ctx.tier.torch_device)

    never_written = [unwritten(o) for o, _ in pairs]
    if any(never_written):
        where = ", ".join(f"output {i}: {n}" for i, n in enumerate(never_written) if n)
        raise RungFailure(
            f"{sum(never_written)} output element(s) were never written — they still hold ktui's poison ({where})",
            {"seed": seed, "unwritten": sum(never_written)},
            status="suspicious",
        )
    results = [compare(o, r, ctx.tolerances) for o, r in pairs]
    figures: dict = {"seed": seed}
    if len(results) == 1:
        figures.update(results[0].figures)
    else:
        figures["outputs"] = [r.figures for r in results]
        worst = min(results, key=lambda r: _as_float(r.figures.get("psnr", float("inf"))))
        figures.update({k: worst.figures[k] for k in HEADLINE if k in worst.figures})
    failures = [f"output {i}: {r.reason}" if len(results) > 1 else r.reason for i, r in enumerate(results) if not r.passed]
    if ctx.note_answer(out, ref) and failures:
        raise RungFailure(
            "returned exactly what an earlier call on other inputs returned: a cached answer, not a computed one",
            figures,
            status="suspicious",
        )
    if failures:
        raise RungFailure("; ".join(failures), figures)
    if mutated:
        figures["mutated_inputs"] = mutated
        raise RungFailure(
            f"custom_kernel modified its input(s) {mutated}: inputs must be left as they were", figures, status="suspicious"
        )
    return Outcome(figures=figures)


def _mutated_inputs(inputs: list, pristine: list) -> list[int]:
    changed = []
    for i, (a, b) in enumerate(zip(inputs, pristine)):
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            same = a.shape == b.shape and bool(torch.equal(a, b) or (torch.isnan(a) & torch.isnan(b) | (a == b)).all())
            if not same:
                changed.append(i)
    return changed


def _as_float(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("inf")
