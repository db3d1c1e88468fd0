"""What a kernel prints belongs to its own run: forwarded as ``output`` events before its
``run_finished`` (a last line without its newline included), never carried into the next job of
the same warm worker, and kept in the run folder's output.txt for the dashboard and agents."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, by_kernel, ktui, make_workspace, parse_events

pytestmark = pytest.mark.worker


def test_printed_lines_end_with_their_run_even_without_a_newline(tmp_path):
    root = make_workspace(tmp_path, kernels=["add_triton"])
    shutil.copy(FIXTURES / "kernels" / "prints.py", root / "kernels" / "aa_prints.py")  # runs first
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--seed", "2", "kernels/aa_prints.py", "kernels/add_triton.py", cwd=root)
    kernels = by_kernel(parse_events(proc.stdout))
    printed = kernels["aa_prints"]
    types = [e["type"] for e in printed]
    texts = [e["text"] for e in printed if e["type"] == "output"]
    assert "prints.py imported" in texts
    assert any(t.startswith("call 1;") for t in texts), texts
    last_output = max(i for i, t in enumerate(types) if t == "output")
    assert last_output < types.index("run_finished")  # the line without a newline came in its run
    assert not [e for e in kernels["add_triton"] if e["type"] == "output" and "call" in e["text"]]
    run_dir = next(e for e in printed if e["type"] == "run_started")["run_dir"]
    kept = (Path(run_dir) / "output.txt").read_text()
    assert "prints.py imported" in kept and "call 1;" in kept


LONG = 50_000_000  # one printed line of 50 MB


def _add_that(then: str) -> str:
    """The shipped add kernel, with ``then`` run in custom_kernel before it launches."""
    source = (FIXTURES.parent.parent / "kernels" / "add_triton.py").read_text()
    head, sep, body = source.partition("def custom_kernel(")
    signature, colon, rest = body.partition(":\n")
    return f"{head}{sep}{signature}{colon}\n    {then}\n{rest}"


def test_a_50_mb_line_is_kept_to_its_start_in_a_crash_message_and_a_passing_runs_output(tmp_path):
    from ktui.protocol.bounds import LINE_CHARS, MESSAGE_CHARS, QUOTE_CHARS

    root = make_workspace(tmp_path, kernels=["add_triton"])
    crash = f'print("x" * {LONG}, flush=True); __import__("ctypes").string_at(0)'
    (root / "kernels" / "add_1crash.py").write_text(_add_that(crash))
    once = f'globals().get("said") or (sys.stdout.write("z" * {LONG}), sys.stdout.flush(), globals().update(said=1))'
    (root / "kernels" / "add_2prints.py").write_text("import sys\n" + _add_that(once))  # no newline after it
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--seed", "2", "kernels", cwd=root)
    assert len(proc.stdout) < 200_000 and len(proc.stderr) < 10_000, (len(proc.stdout), proc.stderr[-2000:])
    kernels = by_kernel(parse_events(proc.stdout))
    crashed = kernels["add_1crash"][-1]
    assert crashed["verdict"] == "crashed" and len(crashed["message"]) <= MESSAGE_CHARS + 100
    first = crashed["message"].splitlines()[0]
    assert first.endswith(f"its last output: {'x' * QUOTE_CHARS}… ({LONG - QUOTE_CHARS:,} more characters not kept)")
    printed = [e["text"] for e in kernels["add_2prints"] if e["type"] == "output"]
    assert printed == ["z" * LINE_CHARS + f"… ({LONG - LINE_CHARS:,} more characters not kept)"]
    assert kernels["add_2prints"][-1]["verdict"] == "passed"
    assert kernels["add_triton"][-1]["verdict"] == "passed"
    assert not [e for e in kernels["add_triton"] if e["type"] == "output" and "z" in e["text"]]
    run_dir = Path(next(e for e in kernels["add_2prints"] if e["type"] == "run_started")["run_dir"])
    assert (run_dir / "output.txt").read_text() == printed[0] + "\n"
    kept = sum(f.stat().st_size for f in (root / ".ktui").rglob("*") if f.is_file())
    assert kept < 5_000_000, kept
