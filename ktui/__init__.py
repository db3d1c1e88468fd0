"""ktui: a verification harness and dashboard for GPU kernels (Triton, CuTeDSL)."""

__version__ = "0.1.0"
