"""Vector addition in TileLang: ``out = x + y``.

Algorithm
---------
Each CTA of 256 threads owns one tile of ``TILE = 4096`` contiguous elements. The whole tiles —
all of ``x`` but its last ``n % TILE`` elements — go to ``add_tiles``, whose tile loop has no
bounds check, so TileLang vectorises it into 128-bit loads and stores (4 float32 or 8 bfloat16
per access, ``TILE / (256 * VEC)`` independent accesses in flight per thread, each warp access
one contiguous 512-byte run). The partial tile, if any, goes to ``add_tail``, one element per
thread with a bounds check. Both are compiled once per dtype: the length is a dynamic size.

What bounds it
--------------
Each element moves three values (read x, read y, write out) for one add: far below any GPU's
ridge point, so it is bound by memory bandwidth. On an H200 the floor for ``n = 1 << 26``
float32 elements is ``12 * 2**26 B`` at the calibrated copy bandwidth (~4.3 TB/s): ~190 us.
"""

import tilelang
import tilelang.language as T
import torch

REFERENCE = "add"

THREADS = 256
TILE = 4096  # elements per CTA: 16 float32 or bfloat16 values per thread, 128-bit accesses
DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@tilelang.jit
def add_tiles(dtype: str):
    """Whole tiles only: no bounds check, so every access is a 128-bit one."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype), Out: T.Tensor((n,), dtype)):
        with T.Kernel(n // TILE, threads=THREADS) as bx:
            for i in T.Parallel(TILE):
                Out[bx * TILE + i] = X[bx * TILE + i] + Y[bx * TILE + i]

    return main


@tilelang.jit
def add_tail(dtype: str):
    """The last ``n % TILE`` elements (fewer than one tile), each guarded by ``i < n``."""
    n = T.dynamic("n")

    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype), Out: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, THREADS), threads=THREADS) as bx:
            for i in T.Parallel(THREADS):
                if bx * THREADS + i < n:
                    Out[bx * THREADS + i] = X[bx * THREADS + i] + Y[bx * THREADS + i]

    return main


def custom_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    xs, ys, outs = x.reshape(-1), y.reshape(-1), out.view(-1)
    whole = xs.numel() // TILE * TILE
    dtype = DTYPES[x.dtype]
    if whole:
        add_tiles(dtype)(xs[:whole], ys[:whole], outs[:whole])
    if whole < xs.numel():
        add_tail(dtype)(xs[whole:], ys[whole:], outs[whole:])
    return out
