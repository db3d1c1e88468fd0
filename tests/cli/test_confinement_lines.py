"""A run's header and summary line say when user code was not confined or a protection of its
sandbox did not hold, and nothing when every one held."""

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


def test_a_run_where_every_protection_held_adds_nothing_to_its_lines(capsys):
    held = "landlock ABI 7: writes, reads, network, signals"
    header, summary = _print(_start(True, held), {"confined": True, "confinement": held}, capsys)
    assert "confined" not in header and "landlock" not in header
    assert summary == "add v2 passed · cpu sm_90a · 1.0 s"


@pytest.mark.parametrize("line", ["landlock ABI 5: writes, reads, network; not held: signals and abstract sockets "
                                  "(Landlock ABI 6)",
                                  "landlock ABI 7: writes, reads, signals; network allowed: --allow-network"])
def test_a_protection_that_did_not_hold_is_named_in_the_header_and_summary(capsys, line):
    header, summary = _print(_start(True, line), {"confined": True, "confinement": line}, capsys)
    assert header.endswith(f"sm_90a · {line}")
    assert summary == f"add v2 passed · cpu sm_90a · {line} · 1.0 s"
