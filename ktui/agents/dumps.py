"""``dump``: one compiler output of one stored version, a page at a time.

Reads what the dumps rung wrote into the version's run folder (``<fn>.ptx``, ``<fn>.sass``, …),
so it works on the CPU tier too (ahead-of-time PTX and SASS), and ``error_map``: the error maps of
the run's report, drawn as text. Pages are bounded in characters; ``next_offset`` continues where a
page stopped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ktui.agents.workspace import BadCall
from ktui.protocol.dsls import dsls, dump_kinds
from ktui.protocol.errormap import ErrorMap, text_lines

# kind → how its files are named in a run folder ("*" is the GPU function's name): every DSL's
# compiler outputs (``ktui.protocol.dsls``), then the run's own files.
KINDS: dict[str, str] = {
    **{kind: f"*{suffix}" for kind, suffix in dump_kinds().items()},
    "source": "source.py", "resources": "resources.json", "report": "report.json", "hotspots": "hotspots.txt",
    "error_map": "report.json",  # drawn from the report: each wrong output's map, as text
}
MAX_PAGE_CHARS = 100_000
DEFAULT_PAGE_CHARS = 8_000  # a page an agent reads without asking: 8 KB of SASS, PTX or output


def read_dump(run_dir: Path, kind: str, function: str | None, offset: int, max_chars: int) -> dict[str, Any]:
    if kind not in KINDS:
        raise BadCall(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    if offset < 0 or not 1 <= max_chars <= MAX_PAGE_CHARS:
        raise BadCall(f"offset must be ≥ 0 and max_chars between 1 and {MAX_PAGE_CHARS}")
    if kind == "error_map":
        return error_maps(run_dir, offset, max_chars)
    pattern = KINDS[kind]
    files = sorted(run_dir.glob(pattern)) if run_dir.is_dir() else []
    if not files:
        produced = "; ".join(f"{d.title}: {' '.join(d.dumps)}" for d in dsls())
        raise BadCall(f"no {kind} in {run_dir}: the run stopped before the dumps rung, or this kernel's "
                      f"DSL does not produce {kind} ({produced})")
    functions = [p.name[: -len(pattern) + 1] if pattern.startswith("*") else p.stem for p in files]
    if function is None:
        chosen = files[0]
    elif function in functions:
        chosen = files[functions.index(function)]
    else:
        raise BadCall(f"no {kind} for function {function!r}: this version has {', '.join(functions)}")
    text = chosen.read_text(encoding="utf-8", errors="replace")
    return {"kind": kind, "function": functions[files.index(chosen)], "functions": functions, "path": str(chosen),
            **page_of(text, offset, max_chars)}


def page_of(text: str, offset: int, max_chars: int) -> dict[str, Any]:
    """``max_chars`` of ``text`` from ``offset``, and where the next page starts (None at the end)."""
    page = text[offset: offset + max_chars]
    end = offset + len(page)
    return {"total_chars": len(text), "offset": offset, "text": page, "next_offset": end if end < len(text) else None}


def error_maps(run_dir: Path, offset: int, max_chars: int) -> dict[str, Any]:
    """Each wrong output's error map in the version's report, drawn as text: its line, the grid with
    its axes, the kinds it counts; the grids themselves in ``maps``."""
    report_path = run_dir / KINDS["report"]
    if not report_path.is_file():
        raise BadCall(f"no report in {run_dir}: the run has not finished")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    drawn, maps = [], []
    for rung in report.get("rungs") or []:
        found = ErrorMap.from_json((rung.get("figures") or {}).get("error_map"))
        if found is not None:
            drawn += [f"[{rung.get('rung')}] {rung.get('status')}", *text_lines(found), ""]
            maps.append({"rung": rung.get("rung"), **found.to_json()})
    if not maps:
        raise BadCall(f"no error map in {report_path}: no rung of this run judged an output wrong")
    return {"kind": "error_map", "function": None, "functions": [], "path": str(report_path), "maps": maps,
            **page_of("\n".join(drawn), offset, max_chars)}
