"""Nsight Compute results as the handful of figures that explain a kernel's time.

ncu exports a report as CSV in two shapes: the *raw* page (one row per kernel launch, one column
per metric, a second row of units) and the *details* page (one row per section metric, plus rows
for ncu's rule findings with their estimated speedups). Both are read by column name, never by
position: ncu versions add columns. Several launches of one kernel are folded into one
``KernelProfile``; several kernels per ``custom_kernel`` (a two-pass algorithm) give one each plus
the total. No torch or triton imports: the dashboard reads ``ncu.json`` through this module.
"""

from ktui.profiling.ncu.files import REPORT_STEM, SUMMARY_FILE, TEXT_FILE, latest, load, write
from ktui.profiling.ncu.parse import (
    Launch,
    NcuParseError,
    csv_rows,
    launches_from_report,
    merge,
    number,
    parse_details,
    parse_raw,
    to_bytes,
    to_us,
)
from ktui.profiling.ncu.summarise import (
    DETAILS,
    NOT_A_STALL,
    RAW,
    SHARED_DETAILS,
    SHARED_RAW,
    STALL_FAMILIES,
    TOP_FINDINGS,
    TOP_STALLS,
    device_name,
    missing_notes,
    stalls_of,
    summarise_launches,
)
from ktui.profiling.ncu.summary import KernelProfile, NcuSummary, first_sentence, fmt_us, kernel_figures, shape_text

__all__ = [
    "DETAILS",
    "NOT_A_STALL",
    "RAW",
    "REPORT_STEM",
    "SHARED_DETAILS",
    "SHARED_RAW",
    "STALL_FAMILIES",
    "SUMMARY_FILE",
    "TEXT_FILE",
    "TOP_FINDINGS",
    "TOP_STALLS",
    "KernelProfile",
    "Launch",
    "NcuParseError",
    "NcuSummary",
    "csv_rows",
    "device_name",
    "first_sentence",
    "fmt_us",
    "kernel_figures",
    "latest",
    "launches_from_report",
    "load",
    "merge",
    "missing_notes",
    "number",
    "parse_details",
    "parse_raw",
    "shape_text",
    "stalls_of",
    "summarise_launches",
    "to_bytes",
    "to_us",
    "write",
]
