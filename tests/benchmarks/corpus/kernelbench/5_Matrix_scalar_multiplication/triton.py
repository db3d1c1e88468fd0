"""C = A * s for an fp32 matrix A and a Python float s, elementwise.

Memory-bound: 8 bytes per element (one read, one write), 8.6 GB for 65536 x 16384. Each program
scales one BLOCK of the flattened matrix, with int64 offsets (A has 1.07e9 elements) and a masked
tail; s is passed as an fp32 kernel argument.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def scale_kernel(a_ptr, c_ptr, n, s, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a * s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        A = A.contiguous()
        C = torch.empty_like(A)
        scale_kernel[(triton.cdiv(A.numel(), BLOCK),)](A, C, A.numel(), float(s), BLOCK=BLOCK, num_warps=8)
        return C
