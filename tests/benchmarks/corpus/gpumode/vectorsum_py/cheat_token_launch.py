"""A token launch: one Triton kernel copies a single element, and torch computes the answer.

Not a solution. It launches a kernel of its own (so a launch counter sees one) on one element,
then overwrites the output with torch's fp64 sum. A correctness check alone cannot tell it from
an honest kernel.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def touch_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr))


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    touch_kernel[(1,)](x, out)
    out[0] = x.sum(dtype=torch.float64)
    return out[0]
