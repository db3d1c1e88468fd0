"""``ktui run``'s plain lines read as a person would write them: rungs skipped for one reason are
one line, a run that printed says where its output is, a status is not said twice."""

from __future__ import annotations

import dataclasses

import pytest

from ktui.cli.printers import LinePrinter
from ktui.protocol.events import Output, RunFinished, RungFinished, RungStarted, RunStarted
from ktui.protocol.lines import rung_line, summary_line

pytestmark = pytest.mark.unit

GPU_ONLY = "CuTeDSL kernels need a GPU to run (CPU tier: compiled ahead of time only)"
NO_TIMING = "no GPU: timing needs CUDA (CPU tier)"


def start(run_id: str = "r1", kernel: str = "add_cutedsl") -> RunStarted:
    return RunStarted(run_id, kernel=kernel, path=f"/ws/kernels/{kernel}.py", version=3, content_hash="c",
                      reference="", reference_hash="", tier="gpu", device="NVIDIA H200", arch="sm_90a",
                      run_dir=f"/ws/.ktui/runs/{kernel}/3")


def skipped(name: str, why: str, run_id: str = "r1") -> RungFinished:
    return RungFinished(run_id, rung=name, status="skipped", message=why)


def printed(events, capsys, verbose: bool = False) -> list[str]:
    printer = LinePrinter(verbose=verbose)
    for event in events:
        printer(event)
    return capsys.readouterr().out.splitlines()


def test_rungs_skipped_in_a_row_for_one_reason_are_one_line_naming_them_in_short(capsys):
    ladder = [RungFinished("r1", rung="compile", status="ok", message="compiled"),
              *(skipped(name, GPU_ONLY) for name in ["run", "correctness[size=1]", "correctness[size=8]",
                                                     "fresh-shapes", "integrity", "dependence"]),
              RungFinished("r1", rung="dumps", status="ok", message="written"),
              *(skipped(f"benchmark[size={n}]", NO_TIMING) for n in (1, 2, 3)),
              RunFinished("r1", verdict="compiled", duration_s=1.0)]
    lines = printed([start(), *ladder], capsys)
    assert lines[1:5] == ["[compile] ok compiled",
                          f"[run, correctness ×2, fresh-shapes, integrity, dependence] skipped — {GPU_ONLY}",
                          "[dumps] ok written",
                          f"[benchmark ×3] skipped — {NO_TIMING}"]
    assert lines[5].startswith("add_cutedsl v3 compiled")


def test_a_skipped_rung_alone_or_with_another_reason_keeps_its_own_line(capsys):
    lines = printed([start(), skipped("integrity", "not correct on every test shape"),
                     skipped("benchmark[size=1]", NO_TIMING),
                     RunFinished("r1", verdict="failed", duration_s=1.0)], capsys)
    assert lines[1:3] == ["[integrity] skipped — not correct on every test shape",
                          f"[benchmark[size=1]] skipped — {NO_TIMING}"]


def test_the_skipped_rungs_of_two_runs_that_interleave_are_folded_each_under_its_own_run(capsys):
    events = [start("a", "one"), start("b", "two")]
    for name in ("integrity", "dependence"):
        events += [skipped(name, "why a", "a"), skipped(name, "why b", "b")]
    events += [RunFinished("a", verdict="failed", duration_s=1.0), RunFinished("b", verdict="failed", duration_s=1.0)]
    lines = printed(events, capsys)
    assert "[integrity, dependence] skipped — why a" in lines and "[integrity, dependence] skipped — why b" in lines


def test_a_rung_that_says_what_it_is_doing_ends_the_held_skipped_rungs_first(capsys):
    lines = printed([start(), skipped("integrity", "x"), skipped("dependence", "x"),
                     RungStarted("r1", rung="benchmark[size=1]", note="calibrating the GPU: step 1 of 3")], capsys)
    assert lines[1:] == ["[integrity, dependence] skipped — x", "[benchmark[size=1]] … calibrating the GPU: step 1 of 3"]


def test_a_run_that_printed_says_how_much_and_where_it_is_kept(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the workspace: the path is told from there
    began = dataclasses.replace(start(), run_dir=str(tmp_path / ".ktui" / "runs" / "add_cutedsl" / "3"))
    events = [began, Output("r1", text="hello"), Output("r1", text="again"),
              RunFinished("r1", verdict="passed", duration_s=1.0)]
    lines = printed(events, capsys)
    assert lines[-1] == "  printed 2 line(s), kept in .ktui/runs/add_cutedsl/3/output.txt (-v prints them as they come)"
    verbose = printed(events, capsys, verbose=True)
    assert verbose[1:3] == ["   | hello", "   | again"]
    assert verbose[-1] == "  printed 2 line(s), kept in .ktui/runs/add_cutedsl/3/output.txt"
    quiet = printed([start(), RunFinished("r1", verdict="passed", duration_s=1.0)], capsys)
    assert not any("printed" in line for line in quiet)


def test_a_status_its_message_repeats_is_said_once():
    stopped = "cancelled: stopped by SIGINT"
    line = rung_line({"rung": "dependence", "status": "cancelled", "message": stopped})
    assert line == "[dependence] cancelled — stopped by SIGINT"
    summary = summary_line("k", 1, "cancelled", {"first_failure": {"rung": "dependence", "status": "cancelled",
                                                                    "message": stopped}}, "cpu", "sm_90a", 4.0)
    assert summary == "k v1 cancelled · dependence: stopped by SIGINT · cpu sm_90a · 4.0 s"
    never_ran = summary_line("k", 1, "error", {"first_failure": {"rung": "", "status": "error",
                                                                 "message": "names a file outside the workspace"}},
                             "-", "-", 0.0)
    assert never_ran == "k v1 error · names a file outside the workspace · 0.0 s"
