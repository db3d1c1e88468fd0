"""The measuring half of ``ktui.measure``, the part that needs torch and Triton: the benchmark's
sampler and clocks, the paired bootstrap, the calibration's measuring process and its streaming
kernels. Worker side only, so that the parent (``ktui --help``, ``ktui run``) never loads torch;
the figures' arithmetic and files stay in ``ktui.measure``.
"""
