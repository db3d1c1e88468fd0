"""Inclusive prefix sum of an fp32 vector, reduce-then-scan over blocks with fp64 carries.

Memory-bound: 12 bytes per element (the input is read twice, the output written once), 3.2 GB
at 268M elements. Pass 1: each program sums one block. Pass 2: one program scans the block sums
into each block's carry (the sum of everything before it), in fp64 so that the carries of
millions of elements do not drift. Pass 3: each program scans its block with `tl.cumsum` and adds
its carry, writing fp32 into the output buffer that arrives in `data`.

The reference returns an fp64 tensor; this returns the fp32 buffer it was given, which the
check compares after promotion.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t

BLOCK = 4096
CARRY_CHUNK = 1024


@triton.jit
def block_sum_kernel(x_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(sums_ptr + pid, tl.sum(x.to(tl.float64), axis=0))


@triton.jit
def carry_kernel(sums_ptr, carries_ptr, n_blocks, CHUNK: tl.constexpr):
    carry = tl.zeros([1], dtype=tl.float64)
    for start in range(0, n_blocks, CHUNK):
        offsets = start + tl.arange(0, CHUNK)
        mask = offsets < n_blocks
        sums = tl.load(sums_ptr + offsets, mask=mask, other=0.0)
        inclusive = tl.cumsum(sums, axis=0)
        tl.store(carries_ptr + offsets, carry + inclusive - sums, mask=mask)
        carry += tl.sum(sums, axis=0)


@triton.jit
def block_scan_kernel(x_ptr, carries_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    carry = tl.load(carries_ptr + pid)
    scanned = carry + tl.cumsum(x, axis=0).to(tl.float64)
    tl.store(out_ptr + offsets, scanned.to(tl.float32), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    n = x.numel()
    n_blocks = triton.cdiv(n, BLOCK)
    sums = torch.empty(n_blocks, device=x.device, dtype=torch.float64)
    carries = torch.empty(n_blocks, device=x.device, dtype=torch.float64)
    block_sum_kernel[(n_blocks,)](x, sums, n, BLOCK=BLOCK, num_warps=8)
    carry_kernel[(1,)](sums, carries, n_blocks, CHUNK=CARRY_CHUNK, num_warps=8)
    block_scan_kernel[(n_blocks,)](x, carries, out, n, BLOCK=BLOCK, num_warps=8)
    return out
