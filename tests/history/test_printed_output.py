"""``output.txt``: what a run printed, kept bounded in lines and in characters."""

from __future__ import annotations

import pytest

from ktui.history.reports import OUTPUT_CHARS, ReportWriter
from ktui.protocol.bounds import LINE_CHARS
from ktui.protocol.events import Output, RunFinished, RunStarted
from ktui.protocol.statedir import OUTPUT_FILE

pytestmark = pytest.mark.unit


def _run(tmp_path, lines: list[str]) -> str:
    run_dir = tmp_path / "runs" / "k" / "1"
    run_dir.mkdir(parents=True)
    writer = ReportWriter(tmp_path)
    writer(RunStarted("r1", kernel="k", path="k.py", version=1, content_hash="h", reference="", reference_hash="",
                      tier="cpu", device="cpu", arch="sm_90a", run_dir=str(run_dir)))
    for line in lines:
        writer(Output("r1", text=line))
    writer(RunFinished("r1", verdict="passed"))
    return (run_dir / OUTPUT_FILE).read_text()


def test_printed_output_past_the_character_bound_is_cut_and_says_so(tmp_path):
    lines = ["first", *["x" * LINE_CHARS] * (OUTPUT_CHARS // LINE_CHARS), "never kept"]
    kept = _run(tmp_path, lines).splitlines()
    assert kept[:2] == ["first", "x" * LINE_CHARS] and "never kept" not in kept
    assert kept[-1].startswith(f"… (more output not kept: the first {len(kept) - 1} lines")
    assert sum(len(line) for line in kept[:-1]) <= OUTPUT_CHARS


def test_a_single_huge_printed_line_is_kept_to_its_start_not_dropped(tmp_path):
    kept = _run(tmp_path, ["x" * (OUTPUT_CHARS + 10), "next"])
    assert kept == "x" * LINE_CHARS + f"… ({OUTPUT_CHARS + 10 - LINE_CHARS:,} more characters not kept)\nnext\n"


def test_printed_lines_within_the_bounds_are_kept_whole(tmp_path):
    assert _run(tmp_path, ["a", "b c"]) == "a\nb c\n"
