"""What an agent reads first about a run: the verdict, the summary, the first failure at its line
and, for a wrong output, where it is wrong.

Built from the same report ``ktui run`` writes (``report.json``, ``.ktui/latest/<kernel>.json``),
so the server's answers and the files on disk never disagree.
"""

from __future__ import annotations

from typing import Any

from ktui.protocol.errormap import ErrorMap

# Rung statuses that are not a failure worth reading first.
_FINE = ("ok", "skipped")
EXCERPT_LINES = 12


def first_failure(rungs: list[dict[str, Any]], with_map: bool = False) -> dict[str, Any] | None:
    """The first rung that did not pass, with the error's type and ``file:line`` and the source
    excerpt; where its output was wrong, in one line (``where_wrong``), and with ``with_map`` the
    error map itself (``error_map``: the grid)."""
    for rung in rungs:
        if rung.get("status") in _FINE:
            continue
        out: dict[str, Any] = {"rung": rung.get("rung"), "status": rung.get("status"), "message": rung.get("message", "")}
        found = ErrorMap.from_json((rung.get("figures") or {}).get("error_map"))
        if found is not None:
            out["where_wrong"] = found.description
            if with_map:
                out["error_map"] = found.to_json()
        error = rung.get("error") or {}
        if error:
            out["error_type"] = error.get("type")
        location = error.get("location") or {}
        if location.get("file"):
            line = location.get("line")
            col = location.get("col")
            out["file"] = location["file"]
            out["line"] = line
            out["where"] = f"{location['file']}:{line}" + (f":{col}" if col else "")
            excerpt = location.get("excerpt") or ""
            out["excerpt"] = "\n".join(excerpt.splitlines()[:EXCERPT_LINES])
        return out
    return None


def run_digest(report: dict[str, Any], with_rungs: bool = False) -> dict[str, Any]:
    """A report trimmed for an agent: verdict, summary, first failure, where the dumps are."""
    rungs = report.get("rungs") or []
    out = {
        "kernel": report.get("kernel"),
        "path": report.get("path"),
        "version": report.get("version"),
        "content_hash": report.get("content_hash"),
        "verdict": report.get("verdict"),
        "message": report.get("message", ""),
        "tier": report.get("tier"),
        "device": report.get("device"),
        "arch": report.get("arch"),
        "summary": report.get("summary") or {},
        "first_failure": first_failure(rungs, with_map=with_rungs),
        "run_dir": report.get("run_dir"),
    }
    if with_rungs:
        out["rungs"] = [_rung(r) for r in rungs]
    return out


def _rung(rung: dict[str, Any]) -> dict[str, Any]:
    """A rung in a list: its status and message, and where its output was wrong when it was."""
    out = {"rung": rung.get("rung"), "status": rung.get("status"), "message": rung.get("message", "")}
    found = ErrorMap.from_json((rung.get("figures") or {}).get("error_map"))
    if found is not None:
        out["where_wrong"] = found.description
    return out
