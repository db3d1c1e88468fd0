"""ktui: a verification harness and dashboard for GPU kernels (Triton, CuTeDSL, TileLang; another DSL
is a package of its own: ``ktui.protocol.dsls``)."""

__version__ = "0.1.0"
