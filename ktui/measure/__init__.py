"""Figures with no user code and no torch, shared by every process: statistics, rooflines, the
device table, the calibration's file and report, SASS resource usage, NVIDIA's tools. What needs
torch to measure (the sampler, the clocks, the calibration's measuring) is ``ktui.worker.timing``.
"""
