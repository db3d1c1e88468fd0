"""``dump``: one compiler output of one stored version, a page at a time.

Reads what the dumps rung wrote into the version's run folder (``<fn>.ptx``, ``<fn>.sass``, …),
so it works on the CPU tier too (ahead-of-time PTX and SASS). Pages are bounded in characters;
``next_offset`` continues where a page stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktui.agents.workspace import BadCall

# kind → how its files are named in a run folder ("*" is the GPU function's name).
KINDS: dict[str, str] = {
    "ptx": "*.ptx", "sass": "*.sass", "ttir": "*.ttir", "ttgir": "*.ttgir", "llir": "*.llir", "mlir": "*.mlir",
    "tir": "*.tir", "cuda": "*.cu",
    "source": "source.py", "resources": "resources.json", "report": "report.json", "hotspots": "hotspots.txt",
}
MAX_PAGE_CHARS = 100_000
DEFAULT_PAGE_CHARS = 8_000  # a page an agent reads without asking: 8 KB of SASS, PTX or output


def read_dump(run_dir: Path, kind: str, function: str | None, offset: int, max_chars: int) -> dict[str, Any]:
    if kind not in KINDS:
        raise BadCall(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    if offset < 0 or not 1 <= max_chars <= MAX_PAGE_CHARS:
        raise BadCall(f"offset must be ≥ 0 and max_chars between 1 and {MAX_PAGE_CHARS}")
    pattern = KINDS[kind]
    files = sorted(run_dir.glob(pattern)) if run_dir.is_dir() else []
    if not files:
        raise BadCall(f"no {kind} in {run_dir}: the run stopped before the dumps rung, or this kernel's "
                      f"DSL does not produce {kind} (Triton: ttir ttgir llir ptx sass; CuTeDSL: mlir ptx sass; TileLang: tir cuda ptx sass)")
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
