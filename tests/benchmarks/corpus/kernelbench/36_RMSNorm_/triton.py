"""RMSNorm over the feature dimension: y = x / sqrt(mean(x^2 over dim 1) + eps), x of shape (B, C, *).

Memory-bound: 8 bytes per element at best (15 GB for 112 x 64 x 512 x 512); the second read of
each tile mostly hits L2. x is viewed as (B, C, S) with S the product of the trailing dimensions;
the mean runs over C, whose elements sit S apart. Each program owns BLOCK_S contiguous positions
of one batch entry: it walks C in BLOCK_C rows accumulating sum(x^2) per position, then walks C
again writing x * rsqrt(sum / C + eps). Loads along S are contiguous, so every pass is coalesced.
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
    inv_rms = tl.rsqrt(sum_sq / C + eps)
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
