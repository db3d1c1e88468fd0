"""One "instruction count": what the dumps rung records (the compile pane) and what the SASS diff
counts are one function's answer, ``ktui.measure.sass.instruction_count``, padding not counted."""

from __future__ import annotations

import pytest
from conftest import ktui, make_workspace, parse_events, rungs

from ktui.history.sassdiff import diff_listings, load_version
from ktui.measure import sass
from ktui.workspace.kernels import state_dir

pytestmark = pytest.mark.worker


def test_the_compile_pane_and_the_sass_diff_count_the_same_instructions_without_the_padding(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "kernels/add_triton.py", "--json", "--seed", "0", "--no-bench", cwd=ws)
    recorded = rungs(parse_events(proc.stdout))["dumps"]["figures"]["functions"]["add_kernel"]["instructions"]

    listing = load_version(state_dir(ws), "add_triton", 1)
    diffed = diff_listings("add_triton", 1, 1, listing, listing).functions[0]
    assert diffed.instructions == (recorded, recorded)

    raw = sass.split_functions((state_dir(ws) / "runs" / "add_triton" / "1" / "add_kernel.sass").read_text())["add_kernel"]
    every_opcode = sum(sass.opcode_counts(raw).values())
    assert recorded == sass.instruction_count(raw) < every_opcode  # the NOP padding and the trap loop are left out
    nops = sass.opcode_counts(raw)["NOP"]
    assert recorded == every_opcode - nops - 1  # less every NOP (all after the code here) and the trap BRA
