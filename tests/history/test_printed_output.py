"""``output.txt``: what a run printed, kept bounded in lines and in characters."""

from __future__ import annotations

import pytest

from ktui.history.reports import OUTPUT_CHARS, ReportWriter
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


def test_a_huge_printed_line_is_cut_at_the_character_bound_and_says_so(tmp_path):
    kept = _run(tmp_path, ["first", "x" * (OUTPUT_CHARS + 10), "never kept"])
    assert kept.startswith("first\n… (more output not kept: the first 1 lines")
    assert "never kept" not in kept and len(kept) < 1000


def test_printed_lines_within_the_bounds_are_kept_whole(tmp_path):
    assert _run(tmp_path, ["a", "b c"]) == "a\nb c\n"
