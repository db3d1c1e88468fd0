"""Per-line figures of two versions side by side: what moved where (``ktui diff``).

Each version's hot spots (``hotspots.json``: SASS instructions per line by class; with
``hotspots_measured.json``, the share of Nsight Compute samples) are put on one list of lines. A
line of the base is matched to the new version's by aligning the two ``source.py`` files (an edit
above it moves its number, not its identity); a line the alignment leaves out is matched by its
text when that text is on one line only in each.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from ktui.measure import hotspots
from ktui.protocol import statedir


def line_map(base_source: str, new_source: str) -> dict[int, int]:
    """{base line: new line} for the lines the two texts share (1-based)."""
    a, b = base_source.splitlines(), new_source.splitlines()
    mapping: dict[int, int] = {}
    for block in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks():
        for i in range(block.size):
            mapping[block.a + i + 1] = block.b + i + 1
    unique_a = _unique(a, set(mapping))
    unique_b = _unique(b, set(mapping.values()))
    for text, n in unique_a.items():
        if text in unique_b:
            mapping[n] = unique_b[text]
    return mapping


def _unique(lines: list[str], taken: set[int]) -> dict[str, int]:
    seen: dict[str, list[int]] = {}
    for n, line in enumerate(lines, 1):
        if line.strip():
            seen.setdefault(line.strip(), []).append(n)
    return {t: ns[0] for t, ns in seen.items() if len(ns) == 1 and ns[0] not in taken}


def _measured_shares(data: dict | None) -> dict[int, float]:
    shares: dict[int, float] = {}
    for k in (data or {}).get("kernels", []):
        for x in k.get("hot_lines", []):
            shares[x["line"]] = shares.get(x["line"], 0.0) + x["share"]
    return shares


def compare(base: dict, base_source: str, new: dict, new_source: str,
            base_measured: dict | None = None, new_measured: dict | None = None) -> dict:
    """Rows of (base line, new line, text, each side's total and counts, measured shares), the
    lines whose figures changed first; ``unchanged`` counts the rest."""
    b_lines, n_lines = hotspots.line_totals(base), hotspots.line_totals(new)
    b_share, n_share = _measured_shares(base_measured), _measured_shares(new_measured)
    mapping = line_map(base_source, new_source)
    reverse = {v: k for k, v in mapping.items()}
    new_text = new_source.splitlines()
    base_text = base_source.splitlines()
    rows, unchanged = [], 0
    pairs = {(b, mapping.get(b)) for b in b_lines} | {(reverse.get(n), n) for n in n_lines}
    for b, n in sorted(pairs, key=lambda p: (p[1] or 10**9, p[0] or 0)):
        before = b_lines.get(b, {}) if b else {}
        after = n_lines.get(n, {}) if n else {}
        text = (new_text[n - 1] if n and n <= len(new_text) else base_text[b - 1] if b and b <= len(base_text) else "")
        row = {"base_line": b, "new_line": n, "text": text.strip(),
               "base": {"total": before.get("total", 0), "counts": before.get("counts", {})},
               "new": {"total": after.get("total", 0), "counts": after.get("counts", {})}}
        if b in b_share or n in n_share:
            row["base"]["share"], row["new"]["share"] = b_share.get(b), n_share.get(n)
        if row["base"] == row["new"]:
            unchanged += 1
            continue
        rows.append(row)
    return {"rows": rows, "unchanged": unchanged}


def compare_versions(state_dir: Path, kernel: str, base_version: int, new_version: int) -> dict | None:
    """``compare`` of two stored versions' run folders; None when either has no hot spots."""
    folders = [statedir.run_dir(state_dir, kernel, v) for v in (base_version, new_version)]
    data = [hotspots.load(f) for f in folders]
    if any(d is None for d in data):
        return None
    sources = [_read(f / "source.py") for f in folders]
    measured = [_json(f / hotspots.MEASURED_FILE) for f in folders]
    result = compare(data[0], sources[0], data[1], sources[1], measured[0], measured[1])
    return {"base_version": base_version, "new_version": new_version, "source": data[1]["source"], **result}


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def text(result: dict) -> str:
    """The changed lines, base → new: line numbers, instructions and the classes that moved."""
    b, n = result["base_version"], result["new_version"]
    out = [f"per line (SASS instructions{', share of samples' if _any_share(result) else ''}): v{b} → v{n}, "
           f"{len(result['rows'])} line(s) changed, {result['unchanged']} unchanged"]
    for row in result["rows"]:
        where = f"{_num(row['base_line'])}→{_num(row['new_line'])}"
        moved = []
        for c in hotspots.CLASSES:
            x, y = row["base"]["counts"].get(c, 0), row["new"]["counts"].get(c, 0)
            if x != y:
                moved.append(f"{hotspots.SHORT[c]} {x}→{y}")
        share = ""
        if "share" in row["base"]:
            share = f"  samples {_pct(row['base']['share'])}→{_pct(row['new']['share'])}"
        out.append(f"  {where:>9}  {row['base']['total']:>4}→{row['new']['total']:<4} {', '.join(moved):<32}{share}  "
                   f"{row['text']}")
    return "\n".join(out)


def _any_share(result: dict) -> bool:
    return any("share" in r["base"] for r in result["rows"])


def _num(n: int | None) -> str:
    return str(n) if n else "-"


def _pct(x: float | None) -> str:
    return f"{x:.0%}" if x is not None else "-"
