"""Reference: row-wise softmax, ``out[i, :] = exp(x[i, :] - max_i) / sum(exp(x[i, :] - max_i))``.

Computed in float64 and rounded to the input's dtype. Inputs have a random scale and offset
per row, some rows with logits in the hundreds: a kernel that forgets to subtract the row
maximum overflows there, which is the point. Memory-bound: one read and one write per element.
"""

import torch

TESTS = [
    {"rows": 1, "cols": 1},
    {"rows": 3, "cols": 7},
    {"rows": 128, "cols": 1000},
    {"rows": 97, "cols": 3001},
    {"rows": 64, "cols": 2048, "dtype": "bfloat16"},
    {"rows": 256, "cols": 8192},
]

BENCHMARKS = [
    {"rows": 4096, "cols": 4096},
    {"rows": 32768, "cols": 1024},
    {"rows": 8192, "cols": 8192, "dtype": "bfloat16"},
]


def generate_input(seed: int, rows: int, cols: int, dtype: str = "float32") -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    # Per-row scale over three decades and offsets up to ±200: a wide dynamic range.
    scale = 10.0 ** torch.empty(rows, 1).uniform_(-1.0, 2.0, generator=gen)
    offset = torch.empty(rows, 1).uniform_(-200.0, 200.0, generator=gen)
    x = torch.randn(rows, cols, generator=gen) * scale + offset
    return (x.to(getattr(torch, dtype)),)


def ref_kernel(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=-1).to(x.dtype)


def _elem(dtype: str) -> int:
    return torch.empty(0, dtype=getattr(torch, dtype)).element_size()


def flops(rows: int, cols: int, dtype: str = "float32") -> int:
    # max, subtract, exp, sum, divide: five operations per element
    return 5 * rows * cols


def bytes_moved(rows: int, cols: int, dtype: str = "float32") -> int:
    return 2 * rows * cols * _elem(dtype)
