"""The compiler caches a confined process may write: ktui's own, never the user's.

The DSLs (Triton, TileLang through TVM-FFI, CuTeDSL…), CUDA and torch keep what they compiled on disk and
load it in every later process that compiles the same thing: Triton dlopens its cached launcher,
TVM-FFI its JIT-built torch extension, torch its C++ extensions, the driver its JIT'ed SASS. A
kernel under test that could write the user's caches (``~/.triton/cache``, ``~/.cache/tvm-ffi``,
``~/.nv/ComputeCache``…) would plant code that the user's next ordinary, unconfined ``python`` ran.
So a confined process points every one of them at ktui's own folder (``statedir.compiler_caches``,
per user) and may write there and nowhere else of the kind; only confined ktui processes use it.
What a kernel plants there reaches later confined runs only: ``--strict`` runs with a fresh private
folder in its private temp folder instead, removed with it, which no later run reads.
"""

from __future__ import annotations

from pathlib import Path

from ktui.protocol.dsls import dsls
from ktui.protocol.statedir import compiler_caches

# Each compiler's cache variable → its folder in the caches' folder. Set whatever the user had.
# The DSLs' own are in their rows (``ktui.protocol.dsls``); CUDA's and torch's here.
VARIABLES = {
    **{name: sub for dsl in dsls() for name, sub in dsl.caches.items()},
    "CUDA_CACHE_PATH": "cuda",  # the driver's JIT cache of PTX compiled to SASS
    "PYTORCH_KERNEL_CACHE_PATH": "torch/kernels",
    "TORCH_EXTENSIONS_DIR": "torch/extensions",  # torch.utils.cpp_extension.load builds and imports here
    "TORCHINDUCTOR_CACHE_DIR": "torch/inductor",
}


def folder(private_tmp: Path | None = None) -> Path:
    """The caches' folder: ktui's own, or for a strict run (``private_tmp``) a fresh one in the
    process's private temp folder, removed with it."""
    return private_tmp / "compilers" if private_tmp is not None else compiler_caches()


def environment(root: Path) -> dict[str, str]:
    """Every cache variable, pointed beneath ``root``."""
    return {name: str(root / sub) for name, sub in VARIABLES.items()}
