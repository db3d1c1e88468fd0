"""ktui's own streaming copy, the kernel ``ktui calibrate`` measures copy bandwidth with.

A calibrated ceiling must be one an honest memory-bound kernel cannot beat. ``torch``'s
``copy_`` is not always the fastest copy the device allows (on an H200 a Triton add read 4394
GB/s against torch's 4241), so the ceiling is taken from the best of a few streaming copies
written the way a good memory-bound kernel is: each program moves one large block of 128-bit
vectors (``VEC_BYTES`` per thread and access), no mask on a buffer that is a whole number of
blocks, 64-bit offsets, and loads and stores that tell the cache not to keep the data
(``evict_first`` loads, ``.cs`` streaming stores), so the L2 holds no line the next block needs.

Imported only where the measurement runs (``python -m ktui.measure.calibrate``, a child process):
it imports Triton and torch.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import triton
import triton.language as tl

# (elements of int32 per program, warps): 16, 32 and 64 KiB per program. The best is the ceiling.
CONFIGS = ((4096, 4), (8192, 8), (16384, 8))


@triton.jit
def _stream_copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    if EVEN:
        data = tl.load(src_ptr + offsets, eviction_policy="evict_first")
        tl.store(dst_ptr + offsets, data, cache_modifier=".cs")
    else:
        mask = offsets < n
        data = tl.load(src_ptr + offsets, mask=mask, eviction_policy="evict_first")
        tl.store(dst_ptr + offsets, data, mask=mask, cache_modifier=".cs")


def stream_copy(src: torch.Tensor, dst: torch.Tensor, block: int, warps: int) -> Callable[[], Any]:
    """A callable that copies ``src`` into ``dst`` (same size, contiguous) with one config."""
    if src.numel() != dst.numel() or not (src.is_contiguous() and dst.is_contiguous()):
        raise ValueError("stream_copy needs two contiguous buffers of one size")
    s, d = src.view(torch.int32), dst.view(torch.int32)
    n = s.numel()
    grid = (triton.cdiv(n, block),)
    even = n % block == 0

    def copy() -> None:
        _stream_copy[grid](s, d, n, BLOCK=block, EVEN=even, num_warps=warps)

    return copy
