"""Two passes over each row in 4096-wide chunks: the sum of squares, then the scaled write.

The first version: one program per row walks it twice (the second read of a row that has left
the L1 costs a second trip to the L2 or HBM), whatever the row length.
"""

import torch
import triton
import triton.language as tl

REFERENCE = "rmsnorm"
EPS = 1e-6
CHUNK = 4096


@triton.jit
def rmsnorm_two_passes(out_ptr, x_ptr, w_ptr, x_stride, out_stride, n_cols, eps, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for start in range(0, n_cols, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    inv = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, CHUNK):
        cols = start + tl.arange(0, CHUNK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * out_stride + cols, (x * inv * w).to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = x if x.stride(1) == 1 else x.contiguous()
    weight = weight.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    if rows:
        rmsnorm_two_passes[(rows,)](out, x, weight, x.stride(0), out.stride(0), cols, EPS, CHUNK=CHUNK, num_warps=8)
    return out
