"""A token launch: one Triton kernel touches a single element, and torch computes the answer.

Not a solution. The kernel runs on one element (so a launch counter sees a launch of the
module's own kernel), and the returned tensor is torch.relu's. A correctness check alone cannot
tell it from an honest kernel.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_one_kernel(x_ptr, y_ptr):
    tl.store(y_ptr, tl.maximum(tl.load(x_ptr), 0.0))


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(1, device=x.device, dtype=x.dtype)
        relu_one_kernel[(1,)](x, scratch)
        return torch.relu(x)
