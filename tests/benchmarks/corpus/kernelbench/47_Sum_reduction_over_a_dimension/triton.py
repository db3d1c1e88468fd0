"""torch.sum(x, dim, keepdim=True) for a contiguous fp32 tensor, any dim.

Memory-bound: 4 bytes per input element read once (8.6 GB for 128 x 4096 x 4095 over dim 1).
x is viewed as (outer, R, inner) with R the reduced dimension. Each program owns BLOCK_N
contiguous positions of `inner` for one `outer` index and walks R in BLOCK_R rows, so every load
is a coalesced [BLOCK_R, BLOCK_N] tile; inner = 4095 is not a multiple of BLOCK_N, so the last
tile is masked.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_R = 32
BLOCK_N = 128


@triton.jit
def sum_dim_kernel(x_ptr, y_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    outer = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    base = outer * R * inner
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < R) & (cols[None, :] < inner)
        tile = tl.load(x_ptr + base + rows[:, None].to(tl.int64) * inner + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(y_ptr + outer * inner + cols, acc, mask=cols < inner)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer, reduced, inner = math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1:])
        out_shape = x.shape[:dim] + (1,) + x.shape[dim + 1:]
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        grid = (outer, triton.cdiv(inner, BLOCK_N))
        sum_dim_kernel[grid](x, y, reduced, inner, BLOCK_R=BLOCK_R, BLOCK_N=BLOCK_N, num_warps=4)
        return y
