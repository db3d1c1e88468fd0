"""What an agent reads first about a run: the verdict, the summary, the first failure at its line
and, for a wrong output, where it is wrong.

Built from the same report ``ktui run`` writes (``report.json``, ``.ktui/latest/<kernel>.json``),
so the server's answers and the files on disk never disagree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktui.dispatch.trust import current, with_trust
from ktui.protocol.errormap import ErrorMap

# Summary keys an answer leaves out: ``first_failure`` (in full beside the summary), ``weak_test`` (the
# first of ``weak_test_reasons``), and what an agent does not act on (how many rungs had each status,
# the compile's seconds, the problem's footprint); ``confined`` only where user code was not confined
# (``confinement`` then says why).
SAID_ELSEWHERE = ("first_failure", "weak_test", "rungs", "counts", "compile_s", "footprint_gb")


def agent_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """A run's summary as an answer carries it (``SAID_ELSEWHERE`` left out)."""
    kept = {k: v for k, v in summary.items() if k not in SAID_ELSEWHERE}
    if kept.get("confined") is True:
        kept.pop("confined")
        kept.pop("confinement", None)
    return kept
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


def run_digest(report: dict[str, Any], with_rungs: bool = False, state: Path | None = None) -> dict[str, Any]:
    """A report trimmed for an agent: verdict, summary, first failure (once: not again in the
    summary), where the dumps are; with ``state`` (its ``.ktui/``), the trust of its pass as it is now."""
    rungs = report.get("rungs") or []
    summary = agent_summary(report.get("summary") or {})
    if state is not None:
        summary = trust_now(state, str(report.get("verdict")), summary, str(report.get("reference_hash") or ""))
    out = {
        "kernel": report.get("kernel"),
        "path": report.get("path"),
        "version": report.get("version"),
        "verdict": report.get("verdict"),
        "tier": report.get("tier"),
        "summary": summary,
        "first_failure": first_failure(rungs, with_map=with_rungs),
        "run_dir": report.get("run_dir"),
    }
    if report.get("tier") != "cpu":  # which GPU (the CPU tier's is always Triton's interpreter)
        out["device"] = report.get("device")
    if report.get("message"):  # why a run ended other than by its ladder (crashed, cancelled, error)
        out["message"] = report["message"]
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


def trust_now(state: Path, verdict: str, summary: dict[str, Any], reference_hash: str) -> dict[str, Any]:
    """``summary`` with the trust of its pass as it is now (``ktui.dispatch.trust``: the audit of its
    reference may have finished since it was stored)."""
    return with_trust(summary, current(state, verdict, summary, reference_hash))
