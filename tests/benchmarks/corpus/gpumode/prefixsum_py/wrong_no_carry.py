"""Inclusive prefix sum where every block scans on its own: the carries between blocks are missing.

The bug: each program runs `tl.cumsum` over its block and stores it, as if it were the whole
vector. The first block is right, so a vector of at most BLOCK elements passes (size 1023 and
1024 here); from element BLOCK on, every output lacks the sum of all earlier blocks.
"""

import triton
import triton.language as tl
from task import input_t, output_t

BLOCK = 1024


@triton.jit
def block_scan_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.cumsum(x, axis=0), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    n = x.numel()
    block_scan_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=4)
    return out
