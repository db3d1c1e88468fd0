"""The sum of an fp32 vector, two passes in fp64, except that the loop stops at the last full block.

The bug: the strided loop runs to `n - BLOCK + 1` so that every load is full and needs no mask,
which silently drops the final partial block. Sizes that are a multiple of BLOCK (1024, 2048,
4096) sum correctly; 1023 and 1025 lose up to BLOCK - 1 elements (offsets reach ±100).
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t

BLOCK = 1024
MAX_PROGRAMS = 1024


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(pid.to(tl.int64) * BLOCK, n - BLOCK + 1, step):
        acc += tl.load(x_ptr + start + tl.arange(0, BLOCK)).to(tl.float64)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, n_partials, BLOCK_P: tl.constexpr):
    offsets = tl.arange(0, BLOCK_P)
    partials = tl.load(partial_ptr + offsets, mask=offsets < n_partials, other=0.0)
    tl.store(out_ptr, tl.sum(partials, axis=0).to(tl.float32))


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    n = x.numel()
    programs = min(triton.cdiv(n, BLOCK), MAX_PROGRAMS)
    partials = torch.empty(programs, device=x.device, dtype=torch.float64)
    partial_sum_kernel[(programs,)](x, partials, n, BLOCK=BLOCK, num_warps=8)
    final_sum_kernel[(1,)](partials, out, programs, BLOCK_P=triton.next_power_of_2(programs))
    return out[0]
