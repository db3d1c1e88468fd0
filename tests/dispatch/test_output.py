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
