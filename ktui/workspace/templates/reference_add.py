"""Reference: elementwise vector addition, ``out = x + y``.

The trusted, slow side of the ``add`` problem. Kernels in ``kernels/add_*.py`` are judged
against it. It is memory-bound: each element reads two values and writes one.
"""

import torch

# Correctness shapes: a single element, sizes that are not multiples of any block, one large.
TESTS = [
    {"size": 1},
    {"size": 1000},
    {"size": 12345},
    {"size": 98432},
    {"size": 1 << 20},
]

# Timing shapes, from launch-bound to bandwidth-bound.
BENCHMARKS = [
    {"size": 1 << 16},
    {"size": 1 << 22},
    {"size": 1 << 26},
]


def generate_input(seed: int, size: int, dtype: str = "float32") -> tuple[torch.Tensor, torch.Tensor]:
    """Two vectors with a random scale and offset each, so no constant answer can pass."""
    gen = torch.Generator().manual_seed(seed)
    scale = torch.empty(2).uniform_(0.5, 4.0, generator=gen)
    offset = torch.empty(2).uniform_(-2.0, 2.0, generator=gen)
    x = torch.randn(size, generator=gen) * scale[0] + offset[0]
    y = torch.randn(size, generator=gen) * scale[1] + offset[1]
    dt = getattr(torch, dtype)
    return x.to(dt), y.to(dt)


def ref_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.double() + y.double()).to(x.dtype)


def flops(size: int, dtype: str = "float32") -> int:
    return size


def bytes_moved(size: int, dtype: str = "float32") -> int:
    return 3 * size * torch.empty(0, dtype=getattr(torch, dtype)).element_size()
