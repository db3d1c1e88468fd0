"""The calibrated memory ceiling: the best that a streaming kernel reaches on this device.

HBM sustains more when reads outnumber writes, so a 1:1 copy is not the ceiling of every honest
memory-bound kernel (on an H200 a Triton add, 2 reads and 1 write, read 104% of the best copy).
``ktui calibrate`` therefore times a few access patterns with ktui's own Triton kernels
(``ktui.worker.timing.bandwidth``: the measuring, in the calibration's process), each over buffers
far larger than the L2 and each counting the bytes it really moves, plus torch's ``copy_``. Every pattern's figure is kept in the
calibration's details, labelled; the calibration's one bandwidth figure is the best of them, and
a benchmark is held to the pattern that matches its own mix of reads and writes (``mixes``, and
``ktui.measure.roofline.Ceiling.for_reads``), so a 1:1 kernel is compared with a 1:1 copy.

Details written (older calibrations have only the ``copy*`` keys, which are still written):
``bandwidth`` (which pattern and kernel set the ceiling), ``bandwidth_patterns`` (per pattern:
its best kernel, its bytes and timing, every config's GB/s, any errors), and for the copy alone
``copy``, ``copy_each_gbs``, ``copy_triton_gbs``, ``copy_torch_gbs``, ``copy_triton_error``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ktui.measure.roofline import Mix

TORCH_COPY = "torch copy_"


@dataclass(frozen=True)
class Pattern:
    name: str
    title: str  # what the ceiling figure and ``describe`` call it
    reads: int  # buffers read per element
    writes: int  # buffers written per element (the sum's partials are counted, not listed here)


PATTERNS = {p.name: p for p in (Pattern("copy", "1:1 copy", 1, 1), Pattern("add", "2-read-1-write add", 2, 1),
                                Pattern("sum", "read-only sum", 1, 0))}


def record(size: int, patterns: dict[str, dict[str, Any]], details: dict[str, Any]) -> float:
    """Put the figures into ``details`` (new keys and the copy's old ones); the ceiling, or NaN."""
    details["bandwidth_patterns"] = patterns
    copy = patterns.get("copy", {})
    each = copy.get("each_gbs", {})
    if each:
        details["copy"] = {"bytes_per_buffer": size, **{k: v for k, v in copy.items()
                                                         if k not in ("title", "reads", "writes", "gbs", "each_gbs",
                                                                      "errors")}}
        details["copy_each_gbs"] = each
    triton = [v for k, v in each.items() if k != TORCH_COPY]
    if triton:
        details["copy_triton_gbs"] = max(triton)
    elif copy.get("errors"):
        details["copy_triton_error"] = next((v for k, v in copy["errors"].items() if k != TORCH_COPY), "")
    if TORCH_COPY in each:
        details["copy_torch_gbs"] = each[TORCH_COPY]
    measured = {name: p["gbs"] for name, p in patterns.items() if "gbs" in p}
    if not measured:
        return math.nan
    best = max(measured, key=measured.get)
    details["bandwidth"] = {"pattern": best, "title": patterns[best]["title"], "kernel": patterns[best]["kernel"],
                            "gbs": measured[best], "bytes_per_buffer": size}
    return measured[best]


def mixes(details: dict[str, Any]) -> tuple[Mix, ...]:
    """Each measured pattern as a ceiling for kernels of its read share (none for a calibration
    saved before the patterns were measured: its one figure serves every kernel)."""
    patterns = details.get("bandwidth_patterns")
    if not isinstance(patterns, dict):
        return ()
    out = []
    for p in patterns.values():
        if isinstance(p, dict) and p.get("gbs") and p.get("reads"):
            out.append(Mix(p.get("title", "?"), p["reads"] / (p["reads"] + p.get("writes", 0)), float(p["gbs"])))
    return tuple(sorted(out, key=lambda m: m.read_share))


def source_note(details: dict[str, Any]) -> str:
    """What set the calibrated bandwidth, for the ceiling figure: ``", read-only sum"`` or ``""``
    (a calibration saved before the patterns were measured, where the copy set it)."""
    title = details.get("bandwidth", {}).get("title") if isinstance(details.get("bandwidth"), dict) else None
    return f", {title}" if title else ""


def describe(bandwidth_gbs: float | None, details: dict[str, Any], datasheet_gbs: float | None) -> list[str]:
    """The bandwidth lines of ``ktui calibrate``'s report: the ceiling, then each pattern labelled."""
    if not bandwidth_gbs:
        return []
    share = f" = {bandwidth_gbs / datasheet_gbs:.0%} of the datasheet {datasheet_gbs:.0f} GB/s" if datasheet_gbs else ""
    patterns = details.get("bandwidth_patterns")
    if not isinstance(patterns, dict):  # saved before the patterns were measured: the copy was the ceiling
        copy = details.get("copy", {})
        lines = [f"  copy bandwidth   {bandwidth_gbs:8.0f} GB/s{share} "
                 f"(read+write of 2 × {copy.get('bytes_per_buffer', 0) / 2**30:.2f} GiB, n={copy.get('samples')}, "
                 f"±{copy.get('rse', 0):.2%}{', ' + copy['kernel'] if copy.get('kernel') else ''})"]
        for label, key in (("Triton copy", "copy_triton_gbs"), ("torch copy_", "copy_torch_gbs")):
            if details.get(key):
                lines.append(f"    {label:<14} {details[key]:8.0f} GB/s")
        if details.get("copy_triton_error"):
            lines.append(f"    Triton copy    not measured: {details['copy_triton_error']}")
        return lines
    best = details.get("bandwidth", {})
    top = patterns.get(best.get("pattern"), {})
    lines = [f"  memory bandwidth {bandwidth_gbs:8.0f} GB/s{share} (best of {len(patterns)} access patterns over "
             f"{best.get('bytes_per_buffer', 0) / 2**30:.2f} GiB buffers: {best.get('title')}, {best.get('kernel')}, "
             f"n={top.get('samples')}, ±{top.get('rse', 0):.2%})"]
    for name, p in patterns.items():
        title = f"{p.get('title', name)}"
        if "gbs" not in p:
            lines.append(f"    {title:<20} not measured: {p.get('error', '')}")
            continue
        mark = "  ← highest" if name == best.get("pattern") else ""
        lines.append(f"    {title:<20} {p['gbs']:8.0f} GB/s  {p.get('kernel')}, "
                     f"{p.get('counted_bytes', 0) / 2**30:.2f} GiB counted{mark}")
        if name == "copy":
            for label, key in (("Triton copy", "copy_triton_gbs"), ("torch copy_", "copy_torch_gbs")):
                if details.get(key):
                    lines.append(f"      {label:<18} {details[key]:8.0f} GB/s")
        for label, error in p.get("errors", {}).items():
            lines.append(f"      {label} not measured: {error}")
    lines.append("    each benchmark is held to the pattern at or just above its own share of reads")
    return lines
