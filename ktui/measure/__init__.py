"""Figures from the device and NVIDIA's tools, with no user code: statistics, timing, clocks,
rooflines, the device table, calibration, SASS resource usage.
"""
