"""The launch floor: the shortest time any kernel takes from launch to completion, and its model.

No kernel moves 786 KB in less than the GPU's own launch-to-completion time, so a roofline of
bytes / bandwidth alone calls a small kernel at that floor "4% of roofline". ``ktui calibrate``
therefore times, under the benchmark's own timer (cold L2, hidden launches, CUDA events), an
empty kernel and a tiny copy — the larger median is the floor — and a copy at sizes from tiny to
large. Two models of a kernel's attainable time are fitted to those copies:

- ``max``: ``max(floor, bytes / bandwidth)`` (the launch overlaps the transfer);
- ``sum``: ``floor + bytes / bandwidth`` (the launch's start-up and the wave's ramp and tail add);

the one with the smaller RMS log error is kept, with every size's residuals, so that
``ktui calibrate`` shows the fit. The record is stored as the calibration's ``launch_floor``; a
calibration saved before it has none, and the roofline says so in its figures.
"""

from __future__ import annotations

import math
from typing import Any

from ktui.measure.roofline import MODEL_MAX, MODEL_SUM, LaunchFloor

# Bytes per buffer of the copies the models are fitted to: a tiny one (the floor) to far past the L2.
COPY_SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30)
TINY_BYTES = COPY_SIZES[0]


def predict(model: str, floor_s: float, seconds_transfer: float) -> float:
    return floor_s + seconds_transfer if model == MODEL_SUM else max(floor_s, seconds_transfer)


def fit(copies: list[dict[str, float]], floor_s: float, gbs: float) -> dict[str, Any]:
    """Each model's prediction of each copy (``bytes`` moved, ``measured_us``) against the
    ``gbs`` bandwidth and the floor, its per-size residual (predicted / measured - 1) and RMS
    log error; ``model``: the smaller error (``max`` on a tie: the simpler claim)."""
    if not copies:
        raise ValueError("a launch-floor fit needs at least one timed copy")
    rows, squares = [], {MODEL_MAX: 0.0, MODEL_SUM: 0.0}
    for copy in sorted(copies, key=lambda c: c["bytes"]):
        measured_s = copy["measured_us"] * 1e-6
        transfer = copy["bytes"] / (gbs * 1e9)
        row: dict[str, float] = {"bytes": copy["bytes"], "measured_us": copy["measured_us"]}
        for model in squares:
            predicted = predict(model, floor_s, transfer)
            row[f"{model}_us"] = predicted * 1e6
            row[f"{model}_residual"] = predicted / measured_s - 1
            squares[model] += math.log(predicted / measured_s) ** 2
        rows.append(row)
    error = {model: math.sqrt(total / len(rows)) for model, total in squares.items()}
    chosen = MODEL_SUM if error[MODEL_SUM] < error[MODEL_MAX] else MODEL_MAX
    return {"model": chosen, "rms_log_error": error, "gbs": gbs, "copies": rows}


def record(empty_us: float, tiny_copy_us: float, copies: list[dict[str, float]], gbs: float) -> dict[str, Any]:
    """The calibration's ``launch_floor`` entry: the floor, what it was taken from, and the fit."""
    floor_us = max(empty_us, tiny_copy_us)
    return {"floor_us": floor_us, "empty_us": empty_us, "tiny_copy_us": tiny_copy_us,
            "tiny_copy_bytes": 2 * TINY_BYTES, **fit(copies, floor_us * 1e-6, gbs)}


def from_record(entry: dict[str, Any] | None, source: str) -> LaunchFloor | None:
    """The stored floor and model, or None for a calibration without one (or a failed measurement)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("floor_us"), (int, float)):
        return None
    if entry.get("model") not in (MODEL_MAX, MODEL_SUM) or not entry["floor_us"] > 0:
        return None
    return LaunchFloor(entry["floor_us"] * 1e-6, entry["model"], source)


def describe(entry: dict[str, Any] | None) -> list[str]:
    """``ktui calibrate``'s lines: the floor, both models' errors, and each copy size's residuals."""
    if not isinstance(entry, dict) or not entry:
        return ["  launch floor     not calibrated (a calibration from before the launch floor: run ktui calibrate)"]
    if "error" in entry and "floor_us" not in entry:
        return [f"  launch floor     not measured: {entry['error']}"]
    error = entry.get("rms_log_error", {})
    lines = [f"  launch floor     {entry['floor_us']:8.2f} µs (empty kernel {entry.get('empty_us', 0):.2f} µs, "
             f"tiny copy of {entry.get('tiny_copy_bytes', 0) / 1024:.0f} KiB {entry.get('tiny_copy_us', 0):.2f} µs; "
             f"cold L2, the benchmark's timer)",
             f"    model {entry.get('model')}: attainable = "
             + ("floor + bytes/bandwidth" if entry.get("model") == MODEL_SUM else "max(floor, bytes/bandwidth)")
             + f" (RMS log error: max {error.get(MODEL_MAX, math.nan):.1%}, sum {error.get(MODEL_SUM, math.nan):.1%};"
             f" copies at {entry.get('gbs', 0):.0f} GB/s)"]
    for row in entry.get("copies", []):
        lines.append(f"      {size_text(row['bytes']):>9} moved  {row['measured_us']:9.2f} µs measured  "
                     f"max {row.get('max_us', 0):9.2f} ({row.get('max_residual', 0):+.1%})  "
                     f"sum {row.get('sum_us', 0):9.2f} ({row.get('sum_residual', 0):+.1%})")
    return lines


def size_text(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"
