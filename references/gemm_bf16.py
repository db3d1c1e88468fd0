"""Reference: a bf16 matrix product, ``out = a @ b`` (a: M×K, b: K×N, out: M×N, all bfloat16).

The reference is ``torch.matmul`` in bfloat16 (cuBLAS, float32 accumulation), so the benchmark's
speedup against it is the speedup against torch. A kernel that also accumulates in float32
differs from it only by the order of the sums and the final rounding to bfloat16: PSNR in the
high 40s to 50s dB. Inputs are scaled per row of ``a`` and per column of ``b`` over two decades,
so a transposed operand or a wrong tile offset shows.
Compute-bound at the benchmark sizes: ``2·M·N·K`` FLOPs over ``2·(MK + KN + MN)`` bytes.
"""

import torch

TOLERANCES = {"bfloat16": {"psnr": 40.0, "cossim": 0.9995}}

TESTS = [
    {"m": 1, "n": 1, "k": 1},
    {"m": 17, "n": 33, "k": 65},
    {"m": 128, "n": 256, "k": 64},
    {"m": 200, "n": 300, "k": 136},
    {"m": 256, "n": 512, "k": 512},
]

BENCHMARKS = [
    {"m": 4096, "n": 4096, "k": 4096},
    {"m": 8192, "n": 8192, "k": 8192},
]


def generate_input(seed: int, m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    row_scale = 10.0 ** torch.empty(m, 1).uniform_(-1.0, 1.0, generator=gen)
    col_scale = 10.0 ** torch.empty(1, n).uniform_(-1.0, 1.0, generator=gen)
    a = torch.randn(m, k, generator=gen) * row_scale
    b = torch.randn(k, n, generator=gen) * col_scale
    return a.to(torch.bfloat16), b.to(torch.bfloat16)


def ref_kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.device.type == "cpu":  # the CPU tier: a float32 product rounded once, as cuBLAS gives
        return (a.float() @ b.float()).to(torch.bfloat16)
    return torch.matmul(a, b)


def flops(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


def bytes_moved(m: int, n: int, k: int) -> int:
    return 2 * (m * k + k * n + m * n)
