"""C = A + B for two fp16 (size, size) matrices, written into the C that arrives in `data`.

Memory-bound: 6 bytes per element (two fp16 reads, one fp16 write), 1.6 GB at size 16384.
Each program adds one contiguous block of the flattened matrices; the mask covers the tail.
An fp16 add is correctly rounded, so the result is bit-identical to torch's.
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
    add_kernel[(triton.cdiv(n, block),)](a, b, c, n, BLOCK=block, num_warps=8)
    return c
