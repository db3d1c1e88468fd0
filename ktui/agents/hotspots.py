"""``hotspots``: the kernel's lines an agent should look at first, from a stored version's run folder.

Static figures come with every run (``hotspots.json``: SASS instructions per line by class, on the
CPU tier too); measured ones once ``ktui profile`` ran on that version (``hotspots_measured.json``:
Nsight Compute's warp-state samples per line, each hot line with its main stall reasons and a
reading). Both name lines as ``file:line`` with the line's text, so an edit can go straight there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ktui.agents.workspace import BadCall
from ktui.measure import hotspots
from ktui.profiling.ncu import source as ncu_source


def read_hotspots(run_dir: Path, top: int) -> dict[str, Any]:
    static = hotspots.load(run_dir)
    if static is None:
        raise BadCall(f"no hot spots in {run_dir}: the run stopped before the dumps rung (nothing was compiled)")
    name = static["source"]
    functions = []
    for fn in static["functions"]:
        ranked = sorted(fn["lines"], key=lambda x: -x["total"])[:top]
        functions.append({
            "function": fn["name"], "instructions": fn["total"],
            "lines": [{"at": f"{name}:{x['line']}", **x} for x in ranked],
            "elsewhere": fn["elsewhere"],
        })
    measured = _measured(run_dir, top)
    return {
        "source": name,
        "static": functions,
        "measured": measured,
        "note": ("static: instructions each line compiled to, ranked by count (no time: loops count once); "
                 + ("measured: Nsight Compute samples per line, hottest first" if measured else
                    "no measured figures for this version: `profile` it on a GPU to get the hot lines with stall reasons")),
    }


def _measured(run_dir: Path, top: int) -> dict | None:
    try:
        data = json.loads((Path(run_dir) / ncu_source.MEASURED_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {
        "kernels": [{"kernel": k["kernel"], "samples": k["samples"],
                     "hot_lines": [{"at": f"{x['file']}:{x['line']}", **x} for x in k["hot_lines"][:top]],
                     "elsewhere": k["elsewhere"]} for k in data.get("kernels", [])],
        "notes": data.get("notes", []),
    }
