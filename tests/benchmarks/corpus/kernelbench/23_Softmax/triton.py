"""Softmax over the last dimension of a 2-D fp32 tensor, rows of any length (393216 here).

Memory-bound: 12 bytes per element (the row is read twice, the output written once), 19 GB for
4096 x 393216. A row is far too long for one block, so each program loops over its row twice:
first an online pass keeping the running max m and the running sum s of exp(x - m), rescaling s
by exp(m_old - m_new) whenever a block raises the max; then a pass writing exp(x - m) / s.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * n_cols
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + cols, mask=cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row + cols, mask=mask)
        tl.store(y_ptr + row + cols, tl.exp(x - m) / s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert x.dim() == 2, "softmax over dim=1 of a 2-D tensor"
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=8)
        return y
