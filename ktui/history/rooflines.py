"""Two versions compared on the same per-shape figures: each benchmark shape's fraction of its
attainable time, its bound, and whether the version is "satisfied".

A mean across shapes mixes a launch-bound small shape with a memory-bound large one and says
neither, so versions are compared shape by shape (``ktui diff``, the dashboard's history). Runs
recorded before per-shape figures have none: they are said to have none, not compared on a mean.
"""

from __future__ import annotations

from typing import Any

from ktui.history.finished import finished_by_version
from ktui.history.store import Store

NO_FIGURES = "no per-shape roofline figures (not benchmarked on a GPU, or recorded before them)"


def shapes_of(summary: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``{shape: {"roofline": fraction, "bound": ...}}`` of a run's summary; {} when it has none."""
    shapes = (summary or {}).get("roofline_shapes")
    if not isinstance(shapes, dict):
        return {}
    return {str(k): v for k, v in shapes.items() if isinstance(v, dict) and isinstance(v.get("roofline"), (int, float))}


def compare(base: dict[str, Any] | None, new: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per shape (the new version's order, then shapes only the base has): both fractions, the
    change in percentage points, and the bound (the new version's where it has the shape)."""
    old, now = shapes_of(base), shapes_of(new)
    rows = []
    for shape in [*now, *(s for s in old if s not in now)]:
        a, b = old.get(shape, {}).get("roofline"), now.get(shape, {}).get("roofline")
        rows.append({"shape": shape, "base": a, "new": b, "bound": (now.get(shape) or old.get(shape) or {}).get("bound"),
                     "change_points": round((b - a) * 100, 1) if a is not None and b is not None else None})
    return rows


def comparison(base: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """What ``ktui diff --json`` and the MCP ``diff`` carry: per shape both fractions and the
    bound, and each version's stop decision (None: no per-shape figures)."""
    return {"shapes": compare(base, new), "satisfied": (new or {}).get("satisfied"),
            "short": (new or {}).get("short"), "base_satisfied": (base or {}).get("satisfied"),
            "provisional": (new or {}).get("roofline_provisional")}


def verdict_text(version: int, summary: dict[str, Any] | None) -> str:
    """``v4 satisfied: every shape ≥ 90%``, ``v4 not satisfied: size=4194304 short of 90%`` or, timed
    without the launch floor, ``v4 roofline provisional, no stop decision: <why>``."""
    summary = summary or {}
    if summary.get("roofline_provisional"):
        return f"v{version} roofline provisional, no stop decision: {summary['roofline_provisional']}"
    if "satisfied" not in summary:
        return f"v{version}: {NO_FIGURES}"
    done = summary.get("roofline_done", 0.9)
    if summary["satisfied"]:
        return f"v{version} satisfied: every shape ≥ {done * 100:.0f}%"
    return f"v{version} not satisfied: {', '.join(summary.get('short') or [])} short of {done * 100:.0f}%"


def lines(base_version: int, base: dict[str, Any] | None, new_version: int, new: dict[str, Any] | None) -> list[str]:
    """The comparison as text, one shape a line."""
    rows = compare(base, new)
    if not rows:
        return [f"attainable per shape: {NO_FIGURES} in v{base_version} or v{new_version}"]
    width = max(len(r["shape"]) for r in rows)
    out = [f"attainable per shape, v{new_version} against v{base_version}:"]
    for r in rows:
        new_text = f"{r['new'] * 100:.0f}%" if r["new"] is not None else "—"
        base_text = f"{r['base'] * 100:.0f}%" if r["base"] is not None else "—"
        change = f", {r['change_points']:+.0f} points" if r["change_points"] is not None else ""
        out.append(f"  {r['shape']:<{width}}  {new_text:>5} (v{base_version} {base_text}{change})  {r['bound'] or ''}".rstrip())
    out.append(f"  {verdict_text(new_version, new)}")
    return out


def version_summary(store: Store, kernel: str, version: int) -> dict[str, Any] | None:
    """The summary of the newest finished run of ``version`` that has per-shape figures, else of
    its newest finished run, else None."""
    finished = finished_by_version(store.runs(kernel)).get(version, [])
    with_figures = [r for r in finished if shapes_of(r.summary)]
    chosen = (with_figures or finished or [None])[0]
    return chosen.summary if chosen is not None else None
