"""The JSON Schema of every message ktui writes, and their page, docs/events.md, built from the code.

Three kinds, each from its module: the events (``events.py``: ``ktui run --json``), the notices
(``notices.py``: ``ktui watch --headless`` and a daemon's views), and the owner socket's requests
and replies (``owner.py``). The documented streams cannot drift from the code: field names and types
come from the dataclasses, descriptions from their docstrings and the comments beside each field.
``python3 -m ktui.protocol.schema [DOCS_DIR]`` rewrites docs/events.md and docs/events.schema.json;
``validate`` checks a JSON value against the subset of JSON Schema written here (no dependency).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import io
import json
import sys
import tokenize
import types
import typing
from pathlib import Path
from typing import Any

from ktui.protocol import events, notices, owner
from ktui.protocol.errormap import ErrorMap
from ktui.protocol.events import EVENT_TYPES
from ktui.protocol.notices import NOTICE_TYPES
from ktui.protocol.owner import REPLY_TYPES, REQUEST_TYPES
from ktui.protocol.sourcelines import parse as parse_python

DRAFT = "https://json-schema.org/draft/2020-12/schema"
GENERATOR = "python3 -m ktui.protocol.schema"
RUNG_STATUSES = (events.OK, events.FAILED, events.SKIPPED, events.SUSPICIOUS, events.CRASHED, events.TIMED_OUT,
                 events.CANCELLED, events.ERROR)
VERDICTS = (events.PASSED, events.COMPILED, events.FAILED, events.SUSPICIOUS, events.CRASHED, events.TIMED_OUT, events.CANCELLED,
            events.INTERRUPTED, events.ERROR)

# Values a field may take, where the code holds them as constants rather than in its type.
ENUMS: dict[tuple[str, str], tuple[str, ...]] = {
    ("run_started", "tier"): ("gpu", "cpu"),
    ("rung_finished", "status"): RUNG_STATUSES,
    ("run_finished", "verdict"): VERDICTS,
}
# What a field's type and comment do not say.
NOTES: dict[tuple[str, str], str] = {
    ("event", "run_id"): "the run this event belongs to",
    ("event", "time"): "when it happened, Unix seconds",
    ("event", "rung"): "the rung's name, e.g. `correctness[size=8]`",
    ("run_started", "version"): "a distinct content of the kernel file: saving the same bytes re-runs the same version",
    ("run_started", "content_hash"): "the first 16 hex digits of the SHA-256 of the file's bytes",
    ("output", "text"): "a line the kernel printed",
    ("rung_finished", "figures"): 'the rung\'s figures; non-finite numbers as the strings "inf", "-inf", "nan"; a '
                                  "rung that judged a wrong output (correctness, fresh-shapes, integrity, a benchmark's "
                                  "timed check) has `error_map`, where it is wrong",
    ("rung_finished", "phases_s"): "where `duration_s` went, by phase (a correctness rung's `inputs`, `candidate`, "
                                   "`reference`, `metrics`; the `compile` rung's `inputs` and `call`, its traced "
                                   "call); the `dumps` rung's `wait` is its duration, and its "
                                   "`files`, `tools` and `analysis` ran on their own thread, beside the checks",
    ("run_finished", "summary"): "`correct: [ok, total]`, `speedup`, `speedup_ci`, `roofline_shapes: {shape: "
                                  "{roofline, bound}}`, `roofline_worst: {shape, roofline, bound}`, `satisfied`, "
                                  "`short` (or, without the GPU's launch floor, `roofline_provisional`: why there is "
                                  "no stop decision), `roofline_done`, `calibration_s` (the GPU's one-time calibration, "
                                  "measured in this run), `label`, `vs_previous`, `vs_best`, `first_failure: {rung, status, message}`, "
                                  "`trusted` (true, false or \"pending\": whether a pass can be trusted, "
                                  "ktui/dispatch/trust.py) and `trust_reasons` (why not), …",
}
# Figures of a fixed form inside a free-form object, each described by its own record.
FIGURE_RECORDS: dict[tuple[str, str], dict[str, type]] = {
    ("rung_finished", "figures"): {"error_map": ErrorMap},
}
PLAIN = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "default"}
KEYWORDS = {"type", "properties", "required", "additionalProperties", "const", "enum", "items", "anyOf", "$ref"}


# The kinds of line, each with the types its module lists, in the order the page shows them.
KINDS: tuple[tuple[str, str, dict[str, type]], ...] = (
    ("Events", "ktui/protocol/events.py", EVENT_TYPES),
    ("Notices", "ktui/protocol/notices.py", NOTICE_TYPES),
    ("The owner's socket: requests", "ktui/protocol/owner.py", REQUEST_TYPES),
    ("The owner's socket: replies", "ktui/protocol/owner.py", REPLY_TYPES),
)
MODULES = (events, notices, owner)


# -- the schema ---------------------------------------------------------------------------------
def build_schema() -> dict[str, Any]:
    """One definition per message type (and per nested record); a line is any one of them."""
    defs: dict[str, Any] = {}
    for _, _, types_ in KINDS:
        for kind, cls in types_.items():
            defs[kind] = _record(cls, kind, defs)
    return {
        "$schema": DRAFT,
        "title": "ktui message",
        "description": "One line of ktui's JSON streams: `ktui run --json` (an event), `ktui watch --headless` (an event "
                       "or a notice), the workspace owner's socket (a request, a reply, an event or a notice). "
                       f"Generated by `{GENERATOR}` from ktui/protocol/events.py, notices.py and owner.py.",
        "anyOf": [{"$ref": f"#/$defs/{kind}"} for _, _, types_ in KINDS for kind in types_],
        "$defs": defs,
    }


def _record(cls: type, kind: str | None, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    comments = field_comments(cls)
    properties: dict[str, Any] = {}
    if kind is not None:
        properties["type"] = {"type": "string", "const": kind}
    for f in dataclasses.fields(cls):
        prop = _type_schema(hints[f.name], defs)
        if (kind, f.name) in ENUMS:
            prop["enum"] = list(ENUMS[(kind, f.name)])
        if (kind, f.name) in FIGURE_RECORDS:
            prop["properties"] = {key: _type_schema(record, defs) for key, record in FIGURE_RECORDS[(kind, f.name)].items()}
        text = NOTES.get((kind, f.name)) or NOTES.get(("event", f.name)) or comments.get(f.name, "")
        if text:
            prop["description"] = text
        default = _default(f)
        if default is not dataclasses.MISSING:
            prop["default"] = default
        properties[f.name] = prop
    record = {"type": "object", "description": docstring(cls), "properties": properties,
              # to_json writes every field, so a line always carries them all
              "required": list(properties), "additionalProperties": False}
    return record


def _type_schema(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if hint in PLAIN:
        return {"type": PLAIN[hint]}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(arg, defs) for arg in args]}
    if origin is dict:
        value = _type_schema(args[1], defs) if args else {}
        return {"type": "object", **({"additionalProperties": value} if value else {})}
    if origin is list or origin is tuple:  # a tuple is written as a JSON array (``tuple[str, ...]``)
        return {"type": "array", **({"items": _type_schema(args[0], defs)} if args else {})}
    if dataclasses.is_dataclass(hint):
        if hint.__name__ not in defs:
            defs[hint.__name__] = {}  # placed first: a record that names itself stays finite
            defs[hint.__name__] = _record(hint, None, defs)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    raise TypeError(f"no JSON Schema for the annotation {hint!r}: teach ktui.protocol.schema._type_schema it")


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING and f.default_factory in (dict, list):
        return f.default_factory()
    return dataclasses.MISSING


# -- what the source says -----------------------------------------------------------------------
@functools.cache
def _source(module: str) -> tuple[dict[str, ast.ClassDef], dict[int, str]]:
    """A module's classes by name, and its comments by line."""
    text = Path(sys.modules[module].__file__).read_text()
    tree = parse_python(text)
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}, comments


def docstring(cls: type) -> str:
    """The class's own docstring as written (a dataclass without one gets its signature: not that)."""
    node = _source(cls.__module__)[0].get(cls.__name__)
    return " ".join((ast.get_docstring(node) or "").split()) if node else ""


def field_comments(cls: type) -> dict[str, str]:
    """``name: str  # what it is`` → {"name": "what it is"}, for the class and its bases."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__ not in {m.__name__ for m in MODULES}:
            continue
        nodes, comments = _source(klass.__module__)
        node = nodes.get(klass.__name__)
        for stmt in node.body if node else []:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.lineno in comments:
                found[stmt.target.id] = comments[stmt.lineno]
    return found


# -- the page -----------------------------------------------------------------------------------
def render_markdown(schema: dict[str, Any]) -> str:
    defs = schema["$defs"]
    lines = [
        "# Events (`--json`), notices and the owner's socket",
        "",
        f"<!-- generated by `{GENERATOR}` from ktui/protocol/events.py, notices.py and owner.py: edit those, "
        "not this page -->",
        "",
        "[← README](../README.md) · [the CLI](cli.md) · the JSON Schema: [events.schema.json](events.schema.json)",
        "",
        "`--json` prints the runs' events, one JSON object per line, flushed as they happen. Every event",
        "has `type`, `run_id` and `time` (Unix seconds), and every field of its type: the default below is",
        "what a reader fills in for a field a line lacks. `ktui watch --headless` prints the same events",
        "and the notices ([the dashboard](dashboard.md)). A caller of the workspace's owner (its daemon,",
        "[the CLI](cli.md)) writes one request on `.ktui/owner/socket` and reads back replies, events and",
        "notices, one JSON object per line.",
    ]
    kinds = [ref["$ref"].rsplit("/", 1)[1] for ref in schema["anyOf"]]
    for title, source, types_ in KINDS:
        lines += ["", f"**{title}** (`{source}`)", "", "| type | what it is |", "| --- | --- |"]
        lines += [f"| [`{kind}`](#{kind}) | {_cell(defs[kind]['description']) or '—'} |" for kind in types_]
    records = [name for name in defs if name not in kinds]
    for name in kinds + records:
        record = defs[name]
        lines += ["", f"## {name if name in records else f'`{name}`'}", ""]
        if record["description"]:
            lines += [record["description"], ""]
        lines += ["| field | type | default | what it is |", "| --- | --- | --- | --- |"]
        for field_name, prop in record["properties"].items():
            default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
            what = prop.get("description", "")
            if "enum" in prop:
                what = (what + "; " if what else "") + "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
            if "const" in prop:
                what = f"always `{prop['const']}`"
            lines.append(f"| `{field_name}` | {_type_text(prop)} | {default} | {_cell(what)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A table cell: a ``|`` in a comment ("gpu" | "cpu") must not split the row."""
    return text.replace("|", "\\|")


def _type_text(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in prop:
        return " or ".join(_type_text(p) for p in prop["anyOf"])
    kind = prop.get("type", "any")
    if kind == "object" and "additionalProperties" in prop:
        return f"object of {_type_text(prop['additionalProperties'])}"
    if kind == "array" and "items" in prop:
        return f"array of {_type_text(prop['items'])}"
    return kind


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


# -- validation ---------------------------------------------------------------------------------
def validate(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None, where: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty when it fits), for the keywords this module writes."""
    root = root if root is not None else schema
    unknown = set(schema) - KEYWORDS - ANNOTATIONS
    if unknown:
        raise ValueError(f"{where}: the schema uses {sorted(unknown)}, which this validator does not check")
    if "$ref" in schema:
        return validate(value, _resolve(schema["$ref"], root), root, where)
    if "anyOf" in schema:
        tried = [validate(value, branch, root, where) for branch in schema["anyOf"]]
        if all(tried):
            # where one form alone matches the value's type and constants (an event's "type"; an
            # object where "ErrorInfo or null" is allowed), its problems are the ones to read
            near = [t for t, branch in zip(tried, schema["anyOf"]) if _selects(value, branch, root)]
            if len(near) == 1:
                return near[0]
            return [f"{where}: fits none of its {len(tried)} forms: " + "; ".join(t[0] for t in tried)]
    problems = []
    if "type" in schema and not _is_type(value, schema["type"]):
        return [f"{where}: {json.dumps(value)[:80]} is not of type {schema['type']}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: {json.dumps(value)[:80]} is not {json.dumps(schema['const'])}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {json.dumps(value)[:80]} is not one of {schema['enum']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        problems += [f"{where}: lacks {name!r}" for name in schema.get("required", []) if name not in value]
        for key, item in value.items():
            if key in properties:
                problems += validate(item, properties[key], root, f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: has {key!r}, which the schema does not list")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += validate(item, schema["additionalProperties"], root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], root, f"{where}[{i}]")
    return problems


def _selects(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether ``value`` is of the form ``schema`` describes: its type, and its constant properties."""
    if "$ref" in schema:
        return _selects(value, _resolve(schema["$ref"], root), root)
    if "type" in schema and not _is_type(value, schema["type"]):
        return False
    consts = {k: p["const"] for k, p in schema.get("properties", {}).items() if "const" in p}
    return not consts or (isinstance(value, dict) and all(value.get(k) == c for k, c in consts.items()))


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local references are resolved, not {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _is_type(value: Any, kind: str | list[str]) -> bool:
    if isinstance(kind, list):
        return any(_is_type(value, k) for k in kind)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    python = {"string": str, "boolean": bool, "null": type(None), "object": dict, "array": list}[kind]
    return isinstance(value, python)


# -- the command --------------------------------------------------------------------------------
def write(docs: Path) -> list[Path]:
    schema = build_schema()
    written = [docs / "events.md", docs / "events.schema.json"]
    written[0].write_text(render_markdown(schema))
    written[1].write_text(schema_text(schema))
    return written


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    docs = Path(argv[0]) if argv else Path(__file__).resolve().parents[2] / "docs"
    if not docs.is_dir():
        print(f"ktui.protocol.schema: {docs} is not a folder: name the docs folder to write into", file=sys.stderr)
        return 2
    for path in write(docs):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
