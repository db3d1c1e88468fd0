"""A 256-bin histogram where each program stores its block's counts instead of adding them.

The bug: the per-block histogram is written with `tl.store` into the shared output, where an
`tl.atomic_add` was needed. Whichever block writes last wins, so with more than one block the
counts of all the others are lost (and on a GPU, which block that is changes from run to run).
"""

import triton
import triton.language as tl
from task import input_t, output_t

BINS = 256
BLOCK = 1024


@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, BINS: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    values = tl.load(x_ptr + offsets, mask=mask, other=0).to(tl.int32)
    counts = tl.histogram(values, BINS, mask=mask)
    tl.store(out_ptr + tl.arange(0, BINS), counts.to(tl.int64))


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    n = x.numel()
    histogram_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BINS=BINS, BLOCK=BLOCK, num_warps=4)
    return out
