"""The empty kernel the launch floor is timed with (``ktui.measure.launchfloor``).

A Triton kernel that does nothing: its time under the benchmark's timer is the launch to
completion alone. Imported only where the measurement runs (it imports Triton).
"""

from __future__ import annotations

from typing import Any, Callable

import triton


@triton.jit
def _nothing(flag):
    pass


def empty() -> Callable[[], Any]:
    """A launch of one program of the empty kernel, ready to time."""
    import torch

    flag = torch.zeros(1, device="cuda", dtype=torch.int32)

    def run() -> None:
        _nothing[(1,)](flag)

    return run


def compile_afresh() -> None:
    """Compile the empty kernel past Triton's cache: a process's first compile pays Triton's
    one-time set-up (its backend, LLVM, ptxas's version), which a compile-ahead helper
    (``ktui.worker.ahead``) pays before it says it is ready."""
    import torch
    from triton import knobs

    flag = torch.zeros(1, device="cuda", dtype=torch.int32)
    saved = getattr(knobs.compilation, "always_compile", False)
    knobs.compilation.always_compile = True
    try:
        _nothing.warmup(flag, grid=(1,))
    finally:
        knobs.compilation.always_compile = saved
