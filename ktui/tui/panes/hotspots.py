"""Hot lines: the SASS pane's other mode (``h``), the selected version's source with a gutter.

Each line of the version's ``source.py`` gets the SASS instructions it compiled to (total, global
loads, MMA, spills: ``hotspots.json``, every run) and, once ``ktui profile`` ran on the version,
its share of Nsight Compute's samples and the reading of its main stall
(``hotspots_measured.json``); below the source, the share on other files' code (Triton's inlined
library reductions, ktui's DSL glue), which is often most of them. The hottest lines are highlighted — by samples when measured, else
by instruction count — and ``e`` opens the first of them in the editor.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Text

from ktui.measure import hotspots

HOT = 5  # lines highlighted
GUTTER_CLASSES = ("global_load", "global_store", "mma", "spill")


def hot_view(run_dir: Path) -> dict | None:
    """The figures the pane draws: per line static counts and measured share/reading, and the hot
    lines in order; None when the version has no hot spots."""
    static = hotspots.load(run_dir)
    if static is None:
        return None
    per_line = hotspots.line_totals(static)
    measured: dict[int, dict] = {}
    elsewhere: dict[str, dict] = {}  # samples on other files' code (a library's inlined reductions…), by group
    try:
        data = json.loads((Path(run_dir) / hotspots.MEASURED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    for k in (data or {}).get("kernels", []):
        for x in k.get("hot_lines", []):
            m = measured.setdefault(x["line"], {"share": 0.0, "reading": x.get("reading", "")})
            m["share"] += x["share"]
        for x in k.get("elsewhere", []):
            e = elsewhere.setdefault(x["file"], {"share": 0.0, "reading": x.get("reading", "")})
            e["share"] += x["share"]
    if measured:
        order = sorted(measured, key=lambda n: -measured[n]["share"])
    else:
        order = sorted(per_line, key=lambda n: -per_line[n]["total"])
    return {"source": static["source"], "lines": per_line, "measured": measured, "hot": order[:HOT],
            "elsewhere": dict(sorted(elsewhere.items(), key=lambda kv: -kv[1]["share"]))}


def hot_renderables(run_dir: Path, version: int) -> tuple[RenderableType, RenderableType, list[int]]:
    """(header, body, hot lines) of the pane for one stored version."""
    view = hot_view(run_dir)
    if view is None:
        return (Text(f"hot lines · v{version}", style="bold"),
                Text("no hot spots for this version: its run stopped before the dumps rung", style="dim"), [])
    source = (Path(run_dir) / "source.py")
    text = source.read_text(encoding="utf-8", errors="replace").splitlines() if source.exists() else []
    measured = view["measured"]
    head = Text()
    head.append(f"hot lines · {view['source']} v{version} · ", style="bold")
    head.append("by samples (ncu)" if measured else "by SASS instructions (static; p profiles for stalls)")
    head.append(" · e opens the hottest · h back to the diff", style="dim")
    labels = "  ".join(hotspots.SHORT[c] for c in GUTTER_CLASSES)
    rows: list[RenderableType] = [Text(f"{'line':>5} {'instr':>5}  {labels}" + ("  samples" if measured else "")
                                       + "  │ source", style="dim")]
    hot = view["hot"]
    first = min((n for n in view["lines"]), default=1)
    last = max((n for n in view["lines"]), default=len(text))
    for n in range(max(1, first - 2), min(len(text), last + 1) + 1):
        fig = view["lines"].get(n)
        gutter = f"{n:>5} {fig['total'] if fig else '':>5}  " + "  ".join(
            f"{(fig['counts'].get(c) or '·') if fig else '':>{len(hotspots.SHORT[c])}}" for c in GUTTER_CLASSES)
        if measured:
            m = measured.get(n)
            gutter += f"  {format(m['share'], '.0%') if m else '':>7}"
        line = Text(gutter + "  │ ", style="bold yellow" if n in hot else "dim" if not fig else "")
        line.append(text[n - 1] if n <= len(text) else "", style="bold" if n in hot else "")
        if n in measured and measured[n]["reading"]:
            line.append(f"  ← {measured[n]['reading']}", style="italic yellow")
        line.no_wrap, line.overflow = True, "ellipsis"
        rows.append(line)
    for name, e in view["elsewhere"].items():  # the samples that are on none of the kernel's lines
        line = Text(f"{'':>5} {'':>5}  {' ' * len(labels)}  {format(e['share'], '.0%'):>7}  │ ", style="dim")
        line.append(f"[{name}]")
        if e["reading"]:
            line.append(f"  ← {e['reading']}", style="italic yellow")
        line.no_wrap, line.overflow = True, "ellipsis"
        rows.append(line)
    return head, Group(*rows), hot
