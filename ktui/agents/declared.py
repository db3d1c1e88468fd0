"""What every tool declares beyond its arguments: its hints (does it run code? change files?) and
the shape of its answer, so a client can tell a read from a run and validate what comes back.

One table for every tool: ``declare`` refuses a server with a tool missing from it, so a new tool
cannot ship unclassified. Hints follow the MCP spec: ``readOnlyHint`` (changes nothing), ``destructiveHint``
(may replace or delete what exists), ``idempotentHint``, ``openWorldHint`` (reaches beyond the
workspace: here, runs user code on the GPU and its tools).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

# Reads .ktui/ and the workspace's files; never runs user code.
_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# Changes what ktui keeps (.ktui/: a pinned baseline), never the user's files; runs nothing.
_SETS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# Runs user code in a worker or a tool's child; records a version and writes its run folder (never the user's files).
_RUNS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)


def _obj(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_STR, _INT, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_OBJ, _ARR = {"type": "object"}, {"type": "array"}
_MAYBE_INT, _MAYBE_OBJ = {"type": ["integer", "null"]}, {"type": ["object", "null"]}
_ANY: dict[str, Any] = {}  # a figure whose type depends on the run (absent, null, a number or a text)
_TRUSTED = {"enum": [True, False, "pending", None]}  # ktui.dispatch.trust; null: never run
_DIGEST = _obj(["kernel", "verdict", "first_failure"], kernel=_STR, path=_ANY, version=_MAYBE_INT, verdict=_STR,
               message=_ANY, tier=_ANY, summary=_OBJ, first_failure=_MAYBE_OBJ, run_dir=_ANY)
_PAGE = dict(path=_STR, total_chars=_INT, offset=_INT, text=_STR, next_offset=_MAYBE_INT)
_AUDIT = _obj(["reference", "verdict", "weak", "checks"], reference=_STR, name=_STR,
              verdict={"enum": ["strong", "weak", "error"]}, weak={"type": "array", "items": _STR},
              reasons={"type": "array", "items": _STR}, message=_STR,
              checks={"type": "array", "items": _obj(["check", "status"], check=_STR, status=_STR, message=_STR)},
              notes=_ARR, fresh_seeds={"type": "array", "items": _STR}, cached=_BOOL, duration_s=_ANY)

TOOLS: dict[str, tuple[ToolAnnotations, dict[str, Any]]] = {
    "run": (_RUNS, _obj(["kernels", "all_passed", "all_trusted"], kernels={"type": "array", "items": _DIGEST},
                        all_passed=_BOOL, all_trusted=_BOOL,
                        compiled={"type": "array", "items": _STR}, not_run=_STR,
                        audits={"type": "array", "items": _obj(["reference", "verdict", "weak"], reference=_STR,
                                                               verdict={"enum": ["strong", "weak", "error", "pending"]},
                                                               weak={"type": "array", "items": _STR},
                                                               reasons={"type": "array", "items": _STR},
                                                               message=_STR)})),
    "latest": (_READ, {**_DIGEST, "properties": {**_DIGEST["properties"], "rungs": _ARR, "stale": _BOOL},
                       "required": [*_DIGEST["required"], "stale"]}),
    "verdict": (_READ, _obj(["kernel", "status", "content_hash", "reference_hash", "result", "message"], kernel=_STR,
                            status={"enum": ["finished", "not_run", "timeout"]}, content_hash=_STR,
                            reference_hash=_STR, waited_s=_ANY, message=_STR, result={**_obj(
                                ["version", "verdict", "summary"], version=_INT, verdict=_STR, message=_ANY,
                                summary=_OBJ, first_failure=_MAYBE_OBJ, tier=_ANY, device=_ANY, strict=_ANY,
                                started=_ANY, run_dir=_ANY), "type": ["object", "null"]})),
    "history": (_READ, _obj(["kernel", "runs"], kernel=_STR, runs={"type": "array", "items": _obj(
        ["version", "verdict"], version=_INT, verdict=_STR, message=_ANY, started=_ANY, duration_s=_ANY, tier=_ANY,
        device=_ANY, strict=_ANY, run_dir=_ANY, summary=_OBJ)})),
    "diff": (_READ, _obj(["base_version", "new_version", "functions"], kernel=_STR, base_version=_INT,
                         new_version=_INT, functions=_ARR, base=_STR, note=_ANY, roofline=_ANY, lines=_ANY)),
    "profile": (_RUNS, _obj(["kernel", "summary"], kernel=_STR, summary=_MAYBE_OBJ)),
    "sanitize": (_RUNS, _obj(["ok", "report"], ok=_BOOL, report=_OBJ)),
    "context_search": (_READ, _obj(["query", "hits"], query=_STR, hits={"type": "array", "items": _obj(
        ["path", "line", "snippet", "file"], path=_STR, line=_INT, snippet=_STR, score=_ANY, source=_ANY, file=_STR)},
        hint=_STR, sources={"type": "array", "items": _STR})),
    "dump": (_READ, _obj(["kernel", "version", "kind", "text", "next_offset"], kernel=_STR, version=_INT, kind=_STR,
                         function=_ANY, functions={"type": "array", "items": _STR}, maps=_ARR, **_PAGE)),
    "hotspots": (_READ, _obj(["kernel", "version", "static"], kernel=_STR, version=_INT, static=_ANY,
                             measured=_ANY, note=_ANY)),
    "audit": (_RUNS, _obj(["references", "all_strong"], references={"type": "array", "items": _AUDIT},
                          all_strong=_BOOL)),
    "output": (_READ, _obj(["kernel", "version", "printed", "text", "next_offset"], kernel=_STR, version=_INT,
                           printed=_BOOL, lines=_INT, note=_STR, **_PAGE)),
    "kernels": (_READ, _obj(["kernels"], kernels={"type": "array", "items": _obj(
        ["path", "kernel", "dsl", "version", "verdict", "stale", "best", "satisfied", "trusted"], path=_STR, kernel=_STR,
        dsl={"type": ["string", "null"]}, version=_MAYBE_INT, verdict={"type": ["string", "null"]}, stale=_BOOL,
        best={"type": ["object", "null"]}, satisfied={"type": ["boolean", "null"]}, trusted=_TRUSTED, problem=_STR)})),
    "pin": (_SETS, _obj(["kernel", "pinned"], kernel=_STR, pinned=_MAYBE_INT)),
    "calibrate": (_RUNS, _obj(["device", "driver", "bandwidth_gbs", "tflops", "launch_floor", "path"], device=_STR,
                              driver=_STR, mig=_ANY, date=_ANY, bandwidth_gbs=_ANY, tflops=_OBJ, launch_floor=_OBJ,
                              path=_ANY, note=_ANY)),
}


def declare(server: MCPServer) -> None:
    """Give every tool of ``server`` its hints and its answer's schema (KeyError names one not in ``TOOLS``)."""
    for tool in server._tool_manager.list_tools():
        if tool.name not in TOOLS:
            raise KeyError(f"tool {tool.name!r} has no entry in ktui.agents.declared.TOOLS")
        tool.annotations, tool.fn_metadata.output_schema = TOOLS[tool.name]
