"""The traced call's inputs made ahead (``ktui.worker.ahead.inputs``): a kernel run twice in a row
gets its next traced call's inputs made between runs, from the same reference version, with a
seed the run records; anything that would make them differ from the run's own makes it make its own.

The reference here prints the seed it makes inputs from, and its benchmark shapes are small: the
printed seed, replayed in the run that takes the inputs, must be the seed its compile rung reports.
"""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import FIXTURES, REPO, make_workspace

from ktui.dispatch.runner import WorkerRunner
from ktui.dispatch.session import Session
from ktui.protocol.events import Output, RungFinished
from ktui.protocol.job import Options
from ktui.workspace.kernels import kernel_at

pytestmark = pytest.mark.worker

SAYS_SEED = "    gen = torch.Generator().manual_seed(seed)\n"
OPTIONS = {"benchmark": False, "fresh_shapes": 0}


@pytest.fixture
def session(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton", "softmax_triton"])
    reference = root / "references" / "add.py"
    text = (REPO / "references" / "add.py").read_text()
    assert SAYS_SEED in text, "the shipped add reference changed: update SAYS_SEED"
    text = text.replace(SAYS_SEED, SAYS_SEED + '    print(f"inputs from seed {seed} size {size}")\n')
    text = re.sub(r"BENCHMARKS = \[.*?\]\n", "BENCHMARKS = [{'size': 4096}]\n", text, flags=re.S)
    reference.write_text(text)
    session = Session(root, runner=WorkerRunner())
    yield session
    session.close()


def run(session: Session, name: str, **options) -> tuple[dict, list[str]]:
    """One run of ``kernels/<name>.py``: its compile rung's figures and what it printed."""
    job = session.prepare(kernel_at(session.root / "kernels" / f"{name}.py"), Options(**{**OPTIONS, **options}))
    compiled, printed, verdict = {}, [], None
    for event in session.events(job):
        if isinstance(event, RungFinished) and event.rung == "compile":
            compiled = event.figures
        elif isinstance(event, Output):
            printed.append(event.text)
        verdict = getattr(event, "verdict", verdict)
    assert verdict == "passed", (verdict, printed)
    return compiled, printed


def test_a_kernel_run_twice_in_a_row_gets_its_next_traced_inputs_made_ahead_with_the_seed_it_reports(session):
    first, _ = run(session, "add_triton")
    second, _ = run(session, "add_triton")
    assert "inputs_made_ahead_s" not in first and "inputs_made_ahead_s" not in second
    third, printed = run(session, "add_triton")
    assert third["inputs_made_ahead_s"] >= 0  # made between the runs, in that many seconds
    # made from the seed the run reports, and what the reference printed meanwhile is this run's
    assert f"inputs from seed {third['seed']} size 4096" in "".join(printed)
    assert len({first["seed"], second["seed"], third["seed"]}) == 3


def test_another_kernel_in_between_or_a_fixed_seed_means_no_inputs_are_made_ahead(session):
    run(session, "add_triton")
    run(session, "add_triton")  # inputs made for a third run of add...
    softmax, _ = run(session, "softmax_triton")  # ...let go by another kernel's run
    assert "inputs_made_ahead_s" not in softmax
    again, _ = run(session, "add_triton")
    assert "inputs_made_ahead_s" not in again  # add ran after softmax: not twice in a row
    run(session, "add_triton")
    fixed, _ = run(session, "add_triton", seed=7)  # made ahead for it, but not from its seeds
    assert "inputs_made_ahead_s" not in fixed


def test_inputs_made_ahead_from_an_older_reference_are_not_taken(session):
    run(session, "add_triton")
    run(session, "add_triton")
    reference = session.root / "references" / "add.py"
    reference.write_text(reference.read_text() + "\n# a new version of the reference\n")
    changed, printed = run(session, "add_triton")
    assert "inputs_made_ahead_s" not in changed
    assert f"inputs from seed {changed['seed']} size 4096" in "".join(printed)


def test_inputs_made_ahead_come_from_the_seeds_the_problems_own_seeds_allow(tmp_path):
    # seedsort's task.yml declares 2113, 6007, 3391 and its values are drawn around the seed: the
    # inputs made between runs come from their span, as the run's own draws do (``ktui.worker.seeds``)
    root = make_workspace(tmp_path / "ws")
    shutil.copytree(FIXTURES / "gpumode", root / "gpumode")
    session = Session(root, runner=WorkerRunner())
    try:
        kernel = kernel_at(root / "gpumode" / "seedsort" / "submission.py")
        compiled = []
        for _ in range(3):
            job = session.prepare(kernel, Options(**OPTIONS))
            for event in session.events(job):
                if isinstance(event, RungFinished) and event.rung == "compile":
                    compiled.append(event.figures)
    finally:
        session.close()
    assert "inputs_made_ahead_s" in compiled[2], compiled[2]
    assert all(2113 <= figures["seed"] <= 6007 for figures in compiled), [f["seed"] for f in compiled]
