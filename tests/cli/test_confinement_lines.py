"""A run's header and summary line say when user code was not confined, and nothing when it was."""

import pytest

from ktui.cli.printers import LinePrinter
from ktui.protocol.events import RunFinished, RunStarted

pytestmark = pytest.mark.unit


def _start(confined, confinement) -> RunStarted:
    return RunStarted("r1", kernel="add", path="/ws/kernels/add.py", version=2, content_hash="c", reference="",
                      reference_hash="", tier="cpu", device="CPU (Triton interpreter)", arch="sm_90a", run_dir="",
                      confined=confined, confinement=confinement)


def _print(start: RunStarted, summary: dict, capsys) -> list[str]:
    printer = LinePrinter()
    printer(start)
    printer(RunFinished("r1", verdict="passed", summary=summary, duration_s=1.0))
    return capsys.readouterr().out.splitlines()


def test_an_unconfined_run_names_why_in_its_header_and_summary(capsys):
    why = "not confined: Landlock needs Linux, this is Darwin"
    header, summary = _print(_start(False, why), {"confined": False, "confinement": why}, capsys)
    assert header.endswith(f"sm_90a · {why}")
    assert summary == f"add v2 passed · cpu sm_90a · {why} · 1.0 s"


def test_a_confined_run_adds_nothing_to_its_lines(capsys):
    header, summary = _print(_start(True, "landlock ABI 7"), {"confined": True, "confinement": "landlock ABI 7"}, capsys)
    assert "confined" not in header and "landlock" not in header
    assert summary == "add v2 passed · cpu sm_90a · 1.0 s"
