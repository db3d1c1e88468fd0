"""What a tool's text content says: a few lines an agent can act on, where the structured content
carries the whole answer (``ktui.agents.answers`` puts one beside the other).

A run's line reads as ``ktui run``'s summary line: the verdict, whether the pass can be trusted,
the first failure at its ``file:line``; a page of a dump or of the output is its text under a
one-line header. A tool without a headline of its own answers its structured content as compact
JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ktui.protocol.lines import roofline_parts, trust_text


def compact(value: Any) -> str:
    """JSON without indentation or spaces: what an answer costs to read."""
    return json.dumps(value, separators=(",", ":"), default=str, ensure_ascii=False)


def run_line(digest: dict[str, Any]) -> str:
    """``softmax_triton v3 failed · correctness[rows=97,cols=3001]: 3/291097 elements … at kernels/softmax_triton.py:42``"""
    summary = digest.get("summary") or {}
    verdict = digest.get("verdict")
    parts = [f"{digest.get('kernel')} v{digest.get('version')} {verdict}"]
    correct = summary.get("correct")
    if isinstance(correct, list) and len(correct) == 2:
        parts.append(f"{correct[0]}/{correct[1]} correct")
    if verdict == "passed" and "trusted" in summary:
        parts.append(trust_text(summary))
    if isinstance(summary.get("speedup"), (int, float)):
        parts.append(f"{summary['speedup']:.2f}x vs reference")
    parts += roofline_parts(summary)
    failure = digest.get("first_failure")
    if failure:
        where = f" at {failure['where']}" if failure.get("where") else ""
        message = (failure.get("message") or failure.get("status") or "").splitlines()
        parts.append(f"{failure.get('rung')}: {message[0] if message else ''}{where}")
    elif digest.get("message") and verdict not in ("passed", "compiled"):
        parts.append(str(digest["message"]).splitlines()[0])
    return " · ".join(parts)


def _run(answer: dict[str, Any]) -> str:
    lines = [run_line(k) for k in answer.get("kernels", [])]
    lines += [f"audit {a.get('reference')}: {a.get('verdict')}" + (f": {'; '.join(a['weak'])}" if a.get("weak") else "")
              + (f": {a['message']}" if a.get("message") and a.get("verdict") in ("pending", "error") else "")
              for a in answer.get("audits", [])]
    if answer.get("not_run"):
        lines.append(answer["not_run"])
    return "\n".join(lines)


def _latest(answer: dict[str, Any]) -> str:
    stale = " · stale: the file or its reference changed since" if answer.get("stale") else ""
    return run_line(answer) + stale


def _verdict(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    if result:
        return f"{answer.get('status')}: " + run_line({"kernel": answer.get("kernel"), **result})
    return f"{answer.get('status')}: {answer.get('message')}"


def _history(answer: dict[str, Any]) -> str:
    runs = answer.get("runs", [])
    if not runs:
        return f"{answer.get('kernel')}: no runs recorded"
    return "\n".join(run_line({"kernel": answer.get("kernel"), **r, "first_failure": (r.get("summary") or {})
                               .get("first_failure")}) for r in runs)


def _kernels(answer: dict[str, Any]) -> str:
    lines = []
    for k in answer.get("kernels", []):
        parts = [f"{k['path']} ({k.get('dsl') or '?'})"]
        if k.get("version") is None:
            parts.append("never run")
        else:
            parts.append(f"v{k['version']} {k.get('verdict')}" + (" (stale)" if k.get("stale") else ""))
        if k.get("best"):
            parts.append(f"best v{k['best']['version']} {k['best']['speedup']:.2f}x")
        if k.get("satisfied") is not None:
            parts.append("satisfied" if k["satisfied"] else "not satisfied")
        if k.get("trusted") is not None:
            parts.append(f"trusted: {str(k['trusted']).lower()}")
        lines.append(" · ".join(parts))
    return "\n".join(lines) or "no kernels in this workspace"


def _diff(answer: dict[str, Any]) -> str:
    lines = [f"{answer.get('kernel')}: SASS v{answer.get('base_version')} → v{answer.get('new_version')}"
             + (" (identical)" if answer.get("identical") else "")]
    for f in answer.get("functions", []):
        base, new = (f.get("instructions") or [None, None])[:2]
        registers = (f.get("resources") or {}).get("registers") or [None, None]
        lines.append(f"  {f.get('name')}: {f.get('status')}, {base} → {new} instructions, registers "
                     f"{registers[0]} → {registers[1]}")
    if answer.get("note"):
        lines.append(answer["note"])
    return "\n".join(lines)


def _page(answer: dict[str, Any]) -> str:
    what = answer.get("kind") or "output"
    function = f" of {answer['function']}" if answer.get("function") else ""
    end = answer.get("offset", 0) + len(answer.get("text", ""))
    more = f"; continue with offset={answer['next_offset']}" if answer.get("next_offset") is not None else ""
    return (f"{what}{function}, {answer.get('kernel')} v{answer.get('version')}: characters {answer.get('offset', 0)}"
            f"–{end} of {answer.get('total_chars')}{more}\n{answer.get('text', '')}")


def _hotspots(answer: dict[str, Any]) -> str:
    lines = []
    for fn in answer.get("static") or []:
        lines.append(f"{fn.get('function')}: {fn.get('instructions')} instructions")
        lines += [f"  {x['at']} {x.get('total')}: {str(x.get('text', '')).strip()}" for x in fn.get("lines", [])]
    for k in (answer.get("measured") or {}).get("kernels", []):
        lines.append(f"{k.get('kernel')} (measured): {k.get('samples')} samples")
        lines += [f"  {x['at']} {x.get('reading', '')}" for x in k.get("hot_lines", [])]
    return "\n".join(lines) or str(answer.get("note", ""))


def _context_search(answer: dict[str, Any]) -> str:
    lines = [f"{h['file']}:{h['line']}: {' '.join(str(h.get('snippet', '')).split())}" for h in answer.get("hits", [])]
    return "\n".join(lines) if lines else str(answer.get("hint", "no match"))


def _audit(answer: dict[str, Any]) -> str:
    return "\n".join(f"{r.get('reference')}: {r.get('verdict')}" + (f": {'; '.join(r['weak'])}" if r.get("weak") else "")
                     + (f" ({r['message']})" if r.get("message") else "") for r in answer.get("references", []))


HEADLINES: dict[str, Callable[[dict[str, Any]], str]] = {
    "run": _run, "latest": _latest, "verdict": _verdict, "history": _history, "kernels": _kernels, "diff": _diff,
    "dump": _page, "output": _page, "hotspots": _hotspots, "context_search": _context_search, "audit": _audit,
}


def headline(tool: str, answer: dict[str, Any]) -> str:
    """The text content of ``tool``'s ``answer``."""
    make = HEADLINES.get(tool)
    return make(answer) if make is not None else compact(answer)
