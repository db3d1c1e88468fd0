"""Rung 5, ``benchmark[<shape>]``: kernel and reference timed side by side on the GPU.

CUDA events around each call, a warm-up, an L2 flush (a write larger than the L2) before every
repetition so each call starts cold, several input sets in rotation, and the median of many
repetitions. The reference is timed the same way in the same process, so the speedup is a
ratio measured side by side.
"""

from __future__ import annotations

import statistics
import time

import torch

from ktui.loop.context import Outcome, RunContext
from ktui.loop.errors import RungSkipped

WARMUP_S = 0.1
MIN_REPS = 10
MAX_REPS = 200
BUDGET_S = 1.0
INPUT_SETS = 3


def run(ctx: RunContext, shape: dict) -> Outcome:
    if not ctx.tier.is_gpu:
        raise RungSkipped("no GPU: timing needs CUDA (CPU tier)")
    sets = [ctx.generate(shape, ctx.next_seed()) for _ in range(INPUT_SETS)]
    flush = _flush_buffer()
    kernel_ms = _time(lambda i: ctx.custom_kernel(*sets[i % len(sets)]), flush)
    ref_ms = _time(lambda i: ctx.ref_kernel(*sets[i % len(sets)]), flush)
    k, r = statistics.median(kernel_ms), statistics.median(ref_ms)
    figures = {"kernel_us": k * 1e3, "ref_us": r * 1e3, "speedup": r / k, "samples": len(kernel_ms)}
    model = _roofline_model(ctx, shape)
    if "bytes" in model:
        figures["gbps"] = model["bytes"] / (k * 1e-3) / 1e9
    if "flops" in model:
        figures["tflops"] = model["flops"] / (k * 1e-3) / 1e12
    return Outcome(figures=figures, message=f"{k * 1e3:.1f} µs vs reference {r * 1e3:.1f} µs: {r / k:.2f}×")


def _flush_buffer() -> torch.Tensor:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 2**20
    return torch.empty(2 * l2, dtype=torch.int8, device="cuda")


def _time(call, flush: torch.Tensor) -> list[float]:
    deadline = time.perf_counter() + WARMUP_S
    i = 0
    while time.perf_counter() < deadline or i < 3:
        call(i)
        i += 1
    torch.cuda.synchronize()
    samples = []
    started = time.perf_counter()
    while len(samples) < MIN_REPS or (len(samples) < MAX_REPS and time.perf_counter() - started < BUDGET_S):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(len(samples))
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


def _roofline_model(ctx: RunContext, shape: dict) -> dict:
    model = {}
    for name, key in (("bytes_moved", "bytes"), ("flops", "flops")):
        fn = getattr(ctx.reference, name, None)
        if callable(fn):
            model[key] = float(fn(**shape))
    return model
