"""Rung ``run``: one call of ``custom_kernel`` on the first test input.

A smoke test before the per-shape checks: it returns plain tensors of the reference's shape,
dtype and device, and every value is finite. It says nothing yet about being right, but an
output with NaN or Inf gets its error map: where it differs from the reference's.
"""

from __future__ import annotations

import time

import torch

from ktui.worker import integrity
from ktui.worker.context import RunContext
from ktui.worker.errormap import locate
from ktui.worker.errors import RungFailure
from ktui.worker.metrics import compare
from ktui.worker.outcome import Outcome
from ktui.worker.tier import clone_tree, synchronize


def run(ctx: RunContext) -> Outcome:
    seed = ctx.next_seed()
    inputs = ctx.generate(ctx.tests[0], seed)
    ref_inputs = clone_tree(inputs)
    ctx.poison_outputs(inputs)
    started = time.perf_counter()
    out = ctx.candidate(*inputs, kept={integrity.PRIVATE_INPUTS: ref_inputs})
    synchronize(ctx.tier)
    elapsed = time.perf_counter() - started
    learned = ctx.learn_output_slots(inputs, ref_inputs, out)
    ref = ctx.ref_kernel(*ref_inputs)
    pairs = ctx.pair(out, ref)
    ctx.note_answer(out, ref, all(compare(o, r, ctx.tolerances).passed for o, r in pairs))
    figures = {
        "seed": seed,
        "wall_s": round(elapsed, 4),
        "outputs": [{"shape": list(o.shape), "dtype": str(o.dtype).removeprefix("torch."), "device": str(o.device)} for o, _ in pairs],
    }
    for i, (o, r) in enumerate(pairs):
        finite = torch.isfinite(o) if o.dtype.is_floating_point else torch.ones_like(o, dtype=torch.bool)
        n_bad = int((~finite).sum())
        if n_bad:
            figures["nonfinite"] = n_bad
            with ctx.phases.timing("error map"):  # where it is wrong, the NaN among the rest
                found = locate(o, r, ctx.tolerances, output=i)
            where = f"; {found.description}" if found is not None else ""
            if found is not None:
                figures["error_map"] = found.to_json()
            raise RungFailure(f"output {i} holds {n_bad} NaN/Inf value(s) out of {o.numel()}{where}", figures)
    shapes = ", ".join(f"{o['dtype']}{o['shape']}" for o in figures["outputs"])
    message = f"returned {shapes} on {ctx.tier.torch_device} in {elapsed * 1e3:.1f} ms"
    return Outcome(figures=figures, message="; ".join(filter(None, [message, learned])))
