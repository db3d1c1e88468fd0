"""RMSNorm whose mean divides by the wrong count: the row length S instead of the C channels.

The bug: the kernel sums x^2 over the C channels of each position, as it should, but divides by
S (the length of the contiguous axis, as in a last-dimension RMSNorm it was adapted from) instead
of C. With S = 512 x 512 and C = 64 the mean is 4096 times too small, and even with eps the rms
comes out about 60 times too small and every output about 60 times too large.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_C = 16
BLOCK_S = 256


@triton.jit
def rms_norm_kernel(x_ptr, y_ptr, C, S, eps, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr):
    batch = tl.program_id(0).to(tl.int64)
    pos = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    base = batch * C * S
    sum_sq = tl.zeros([BLOCK_S], dtype=tl.float32)
    for c0 in range(0, C, BLOCK_C):
        chans = c0 + tl.arange(0, BLOCK_C)
        mask = (chans[:, None] < C) & (pos[None, :] < S)
        x = tl.load(x_ptr + base + chans[:, None].to(tl.int64) * S + pos[None, :], mask=mask, other=0.0)
        sum_sq += tl.sum(x * x, axis=0)
    inv_rms = tl.rsqrt(sum_sq / S + eps)
    for c0 in range(0, C, BLOCK_C):
        chans = c0 + tl.arange(0, BLOCK_C)
        mask = (chans[:, None] < C) & (pos[None, :] < S)
        offsets = base + chans[:, None].to(tl.int64) * S + pos[None, :]
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, x * inv_rms[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        batch, channels = x.shape[0], x.shape[1]
        positions = x[0, 0].numel()
        grid = (batch, triton.cdiv(positions, BLOCK_S))
        rms_norm_kernel[grid](x, y, channels, positions, self.eps,
                              BLOCK_C=BLOCK_C, BLOCK_S=BLOCK_S, num_warps=4)
        return y
