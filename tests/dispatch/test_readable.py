"""A worker reads its runs' workspaces as they were when its rules were made: the parent names what
a job needs read and replaces a warm worker that does not read it yet, or whose rules were made
before a new entry at the workspace's root, a file there replaced by a save, or a new calibration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO, make_workspace

from ktui.dispatch.readable import ReadRules, reads_of, state
from ktui.dispatch.runner import WorkerRunner
from ktui.dispatch.session import Session
from ktui.protocol.job import Job, Options
from ktui.workspace.kernels import kernel_at


def _job(root: Path, **fields) -> Job:
    base = dict(run_id="r", kernel_id="k", kernel_path=str(root / "kernels" / "k.py"),
                reference_path=str(root / "references" / "add.py"), reference_error="", reference_hash="",
                root=str(root), version=1, content_hash="", source="", run_dir="")
    return Job(**{**base, **fields})


def _save(path: Path, text: str) -> None:
    """As an editor saves: a new file renamed over the old one."""
    tmp = path.with_name(path.name + ".swp")
    tmp.write_text(text)
    os.replace(tmp, path)


@pytest.mark.unit
def test_a_job_needs_its_workspace_and_what_it_names_outside_it(tmp_path):
    root = tmp_path / "ws"
    elsewhere = tmp_path / "problems" / "ref.py"
    job = _job(root, reference_path=str(elsewhere), reference_modules={"utils": str(tmp_path / "problems" / "utils.py")})
    assert reads_of(job) == [str(root), str(elsewhere), str(tmp_path / "problems" / "utils.py")]


@pytest.mark.unit
def test_a_new_root_entry_or_a_saved_root_file_makes_a_warm_workers_rules_out_of_date(tmp_path):
    root = make_workspace(tmp_path / "ws")
    (root / "helper.py").write_text("A = 1\n")
    rules = ReadRules()
    assert rules.admit(_job(root))  # a first workspace: a worker that may read it
    (root / ".ktui").mkdir()
    (root / ".ktui" / "history.db").write_text("a run")
    (root / "kernels" / "k.py").write_text("# edited in place\n")
    _save(root / "kernels" / "k.py", "# saved by rename\n")  # beneath a folder it reads: still read
    assert not rules.admit(_job(root))
    _save(root / "helper.py", "A = 2\n")
    assert rules.admit(_job(root))
    assert not rules.admit(_job(root))
    (root / "data").mkdir()
    assert rules.admit(_job(root))
    _save(root / ".ktui" / "calibration.json", "{}")  # ktui calibrate writes the file the benchmark reads
    assert rules.admit(_job(root))
    assert state([str(root)]) == state([str(root)])


@pytest.mark.worker
def test_a_warm_worker_is_replaced_to_read_a_root_module_saved_after_it_started(tmp_path):
    root = make_workspace(tmp_path / "ws")
    (root / "blocks.py").write_text("BLOCK = 1024\n")
    text = (REPO / "kernels" / "add_triton.py").read_text()
    assert "    block = 1024\n" in text
    (root / "kernels" / "add_blocks.py").write_text("from blocks import BLOCK\n" + text.replace("    block = 1024\n",
                                                                                                "    block = BLOCK\n"))
    runner = WorkerRunner()
    session = Session(root, runner=runner)
    try:
        kernel = kernel_at(root / "kernels" / "add_blocks.py")
        first = session.run(kernel, Options(seed=1, benchmark=False, fresh_shapes=0))
        assert first.verdict == "passed", first.message
        pid = runner.describe()["pid"]
        assert session.run(kernel, Options(seed=2, benchmark=False, fresh_shapes=0)).verdict == "passed"
        assert runner.describe()["pid"] == pid  # nothing changed: the same warm worker
        _save(root / "blocks.py", "BLOCK = 512\n")
        again = session.run(kernel, Options(seed=3, benchmark=False, fresh_shapes=0))
        assert again.verdict == "passed", again.message  # it reads the new file
        assert runner.describe()["pid"] != pid
    finally:
        session.close()
