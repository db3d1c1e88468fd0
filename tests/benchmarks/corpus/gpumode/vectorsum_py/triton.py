"""The sum of an fp32 vector, in two passes, accumulated in fp64.

Memory-bound: 4 bytes per element read once (210 MB at 52M elements). The check is
rtol 1e-5 against an fp64 sum, and the inputs carry offsets up to ±100, so partial sums are
kept in fp64: an fp32 tree over 52M elements can drift past that tolerance.
Pass 1: a fixed number of programs stride over the vector, each keeping one fp64 accumulator
per lane, and write one partial sum each. Pass 2: one program adds the partials and writes
the fp32 result into the output buffer that arrives in `data`.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t

BLOCK = 4096
MAX_PROGRAMS = 1024


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.float64)
    for start in range(pid.to(tl.int64) * BLOCK, n, step):
        offsets = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0).to(tl.float64)
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
    # The reference returns a 0-d tensor; out[0] is a view of the buffer just written.
    return out[0]
