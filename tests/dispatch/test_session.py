"""A session's runs as the parent sees them: what it decides before any worker is involved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import make_workspace

from ktui.dispatch.runner import WorkerConfig, WorkerRunner
from ktui.dispatch.session import Session
from ktui.protocol.events import RunFinished, RungFinished, RunStarted
from ktui.protocol.job import Options
from ktui.workspace.kernels import discover


def my_workers() -> list[int]:
    """This process's children that are ktui workers (a warm one stays until the runner closes)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit():
                continue
            status = (entry / "status").read_text()
            ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
            if ppid == os.getpid() and b"ktui.worker.main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, StopIteration):
            continue
    return found


@pytest.fixture
def new_workers():
    """This process's ktui workers started since the test began: a worker of other tests that is
    still alive (the session's warm one, ``warm_ktui``) is none of this test's."""
    before = set(my_workers())
    return lambda: [pid for pid in my_workers() if pid not in before]


@pytest.fixture
def session(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["syntax_error"])
    session = Session(root, runner=WorkerRunner(WorkerConfig(force_cpu=True)))
    yield session
    session.close()


def run_events(session: Session, name: str) -> list:
    (kernel,) = discover([session.root / "kernels" / f"{name}.py"])
    return list(session.events(session.prepare(kernel, Options(force_cpu=True, benchmark=False))))


@pytest.mark.unit
def test_a_syntax_error_fails_the_pre_checks_at_its_line_and_starts_no_worker(session, new_workers):
    started, pre, done = run_events(session, "syntax_error")
    assert new_workers() == []
    assert isinstance(started, RunStarted) and started.tier == "-"  # no worker said where it ran
    assert isinstance(pre, RungFinished) and (pre.rung, pre.status) == ("pre-checks", "failed")
    assert pre.message.startswith("SyntaxError: ") and "(syntax_error.py:11:" in pre.message
    loc = pre.error.location
    assert (Path(loc.file).name, loc.line) == ("syntax_error.py", 11)
    assert ">11 |     offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK" in loc.excerpt and "^" in loc.excerpt
    assert isinstance(done, RunFinished) and done.verdict == "failed"
    assert done.summary["first_failure"]["rung"] == "pre-checks"
    assert session.store.runs("syntax_error")[0].verdict == "failed"  # recorded like any run


@pytest.mark.unit
def test_a_syntax_error_in_the_reference_is_placed_in_the_reference(session, new_workers):
    reference = session.root / "references" / "add.py"
    reference.write_text(reference.read_text() + "\ndef broken(:\n")
    _, pre, _ = run_events(session, "add_triton")
    assert new_workers() == []
    assert Path(pre.error.location.file) == reference and pre.error.location.line == len(reference.read_text().splitlines())


@pytest.mark.worker
def test_a_kernel_that_compiles_still_runs_in_the_worker(session, new_workers):
    events = run_events(session, "add_triton")
    assert events[0].tier == "cpu" and len(new_workers()) == 1
    assert events[-1].verdict == "passed"
