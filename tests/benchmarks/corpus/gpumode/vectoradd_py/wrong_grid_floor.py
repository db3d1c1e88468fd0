"""C = A + B with the grid sized by floor division: the last partial block is never launched.

The bug: `n // BLOCK` programs instead of `triton.cdiv(n, BLOCK)`. Sizes whose element count is a
multiple of the block (128, 256, 512) come out right; 127 and 129 leave up to BLOCK - 1 trailing
elements of C unwritten.
"""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    n = a.numel()
    block = 4096
    add_kernel[(n // block,)](a, b, c, n, BLOCK=block, num_warps=8)
    return c
