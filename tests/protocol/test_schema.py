"""The events' JSON Schema and docs/events.md are generated from events.py, and real runs fit them."""

import json

import pytest
from conftest import REPO, ktui, make_workspace, parse_events

from ktui.protocol.schema import build_schema, render_markdown, schema_text, validate

DOCS = REPO / "docs"
REGENERATE = "regenerate them with `python3 -m ktui.protocol.schema`"


@pytest.mark.unit
def test_the_committed_event_page_is_what_the_generator_writes_now():
    assert (DOCS / "events.md").read_text() == render_markdown(build_schema()), f"docs/events.md is stale: {REGENERATE}"


@pytest.mark.unit
def test_the_committed_event_schema_is_what_the_generator_writes_now():
    assert (DOCS / "events.schema.json").read_text() == schema_text(build_schema()), (
        f"docs/events.schema.json is stale: {REGENERATE}")


@pytest.mark.worker
def test_every_line_of_a_real_cpu_run_fits_the_schema(tmp_path, warm_ktui):
    """A passing Triton kernel, one that raises on the host (an error with its source location),
    one that prints (output events) and one that leaves its tail unwritten (an error map): every
    kind of event a run prints."""
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["raises", "prints", "partial_write"])
    proc = warm_ktui("run", "--no-audit", "--cpu", "--json", "--no-bench", "--seed", "1",
                "kernels/add_triton.py", "kernels/raises.py", "kernels/prints.py", "kernels/partial_write.py", cwd=root)
    lines = parse_events(proc.stdout)
    assert {e["type"] for e in lines} == {"run_started", "rung_started", "rung_finished", "artifact", "output",
                                          "run_finished"}, proc.stderr[-2000:]
    assert any(e["type"] == "rung_finished" and e["error"] and e["error"]["location"] for e in lines)
    assert any(e["type"] == "rung_finished" and "error_map" in e["figures"] for e in lines)  # a wrong output's map
    schema = json.loads((DOCS / "events.schema.json").read_text())
    problems = [f"{e['type']}: {p}" for e in lines for p in validate(e, schema)]
    assert problems == []


@pytest.mark.worker
@pytest.mark.gpu
def test_every_line_of_a_real_gpu_run_fits_the_schema(tmp_path):
    """On the device: benchmark figures, the GPU's index and UUID, a CuTeDSL kernel that runs, a crash."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path / "ws", kernels=["add_triton", "add_cutedsl"], fixtures=["crash_segfault"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "1", "--bench-time", "1", "kernels/", cwd=root, timeout=900)
    lines = parse_events(proc.stdout)
    verdicts = {e["verdict"] for e in lines if e["type"] == "run_finished"}
    assert {"passed", "crashed"} <= verdicts, proc.stderr[-2000:]
    assert any(e["type"] == "rung_finished" and e["rung"].startswith("benchmark[") and e["status"] == "ok" for e in lines)
    schema = json.loads((DOCS / "events.schema.json").read_text())
    problems = [f"{e['type']}: {p}" for e in lines for p in validate(e, schema)]
    assert problems == []


def _finished(**changes):
    line = {"type": "run_finished", "run_id": "r1", "time": 1.5, "verdict": "passed", "message": "",
            "summary": {"correct": [5, 5]}, "duration_s": 2.0}
    return {**line, **changes}


@pytest.mark.unit
def test_a_line_that_fits_has_no_problems():
    assert validate(_finished(), build_schema()) == []


@pytest.mark.unit
@pytest.mark.parametrize(("line", "said"), [
    ({k: v for k, v in _finished().items() if k != "verdict"}, "$: lacks 'verdict'"),
    (_finished(verdict="great"), "$.verdict: \"great\" is not one of"),
    (_finished(duration_s="2"), '$.duration_s: "2" is not of type number'),
    (_finished(extra=1), "$: has 'extra', which the schema does not list"),
    (_finished(type="run_done"), "fits none of its"),
])
def test_a_line_that_breaks_the_schema_is_named_with_what_is_wrong(line, said):
    problems = validate(line, build_schema())
    assert any(said in p for p in problems), problems


@pytest.mark.unit
def test_a_nested_error_is_checked_to_its_source_location():
    line = {"type": "rung_finished", "run_id": "r1", "time": 1.0, "rung": "run", "status": "failed", "figures": {},
            "message": "KeyError", "duration_s": 0.1, "phases_s": {},
            "error": {"type": "KeyError", "message": "'y'", "traceback": "", "location": {"file": "k.py", "line": "19", "col": None, "excerpt": "", "first_line": None}}}
    problems = validate(line, build_schema())
    assert problems == ['$.error.location.line: "19" is not of type integer']


@pytest.mark.unit
def test_an_error_map_that_breaks_its_record_is_named_with_what_is_wrong():
    map_ = {"description": "NaN in row 0 only", "pattern": "product", "shape": [4, 5], "rows": 4, "cols": 5,
            "slices": 1, "cell_rows": 1, "cell_cols": 1, "grid": ["aaaaa", ".....", ".....", "....."],
            "mismatched": 5, "kinds": {"nan": 5}, "output": 0}
    line = {"type": "rung_finished", "run_id": "r1", "time": 1.5, "rung": "correctness[size=5]", "status": "failed",
            "figures": {"seed": 3, "error_map": map_}, "message": "", "error": None, "duration_s": 0.1, "phases_s": {}}
    assert validate(line, build_schema()) == []
    broken = {**line, "figures": {"error_map": {k: v for k, v in map_.items() if k != "grid"}}}
    assert "$.figures.error_map: lacks 'grid'" in validate(broken, build_schema())


def _example(cls):
    """An instance of a notice or an owner message with every field set from its type."""
    import dataclasses
    import typing

    values = {str: "x", int: 1, float: 1.5, bool: True}
    hints = typing.get_type_hints(cls)
    made = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        origin = typing.get_origin(hint)
        if hint in values:
            made[f.name] = values[hint]
        elif origin is tuple:
            made[f.name] = ("a", "b")
        elif origin is list:
            made[f.name] = ["a"]
        elif origin is dict or any(typing.get_origin(a) is dict for a in typing.get_args(hint)):
            made[f.name] = {"k": "v"} if hint == dict[str, str] else {"k": 1.0}
        else:  # X | None
            made[f.name] = values[next(a for a in typing.get_args(hint) if a is not type(None))]
    return cls(**made)


@pytest.mark.unit
def test_every_notice_and_owner_message_fits_the_schema_and_reads_back_as_itself():
    from ktui.protocol.notices import NOTICE_TYPES, notice_from_json
    from ktui.protocol.owner import MESSAGE_TYPES, message_from_json

    schema = json.loads((DOCS / "events.schema.json").read_text())
    for read, types in ((notice_from_json, NOTICE_TYPES), (message_from_json, MESSAGE_TYPES)):
        for kind, cls in types.items():
            example = _example(cls)
            line = json.loads(json.dumps(example.to_json()))
            assert validate(line, schema) == [], kind
            assert read(line) == example, kind
    assert validate({"type": "queue", "running": None, "queued": "add"}, schema), "a string is not a list"
