"""A kernel file whose name is not UTF-8 (bytes Python keeps as surrogates) cannot be recorded,
printed or sent as JSON text: ktui leaves it out and names it, escaped, in one line — on
``ktui run`` and the headless watch here, the dashboard in ``tests/tui/test_dashboard.py`` — and
the other kernels run as ever."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import REPO, ktui, make_workspace
from headless import Headless

pytestmark = pytest.mark.worker

ADD = (REPO / "kernels" / "add_triton.py").read_bytes()


def named_in_bytes(folder: Path, name: bytes) -> Path:
    """A copy of the shipped add kernel under a file name of raw bytes."""
    path = Path(os.fsdecode(os.fsencode(folder) + b"/" + name))
    path.write_bytes(ADD)
    return path


def test_run_of_a_folder_leaves_the_file_out_in_one_escaped_line_and_runs_the_rest(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    bad = named_in_bytes(ws / "kernels", b"add_\xff.py")
    folder = ktui("run", "--no-audit", "--no-bench", "--seed", "1", "kernels", cwd=ws)
    named = ktui("run", "--no-audit", "--no-bench", str(bad), cwd=ws)
    assert "Traceback" not in folder.stderr and folder.returncode == 0, folder.stdout + folder.stderr
    assert "add_triton v1 passed" in folder.stdout
    assert folder.stderr == "ktui: kernels/add_\\xff.py: left out: its name is not UTF-8 (rename it to run it)\n"
    assert named.returncode == 2 and "Traceback" not in named.stderr, named.stderr
    assert named.stderr.count("\n") == 1 and "add_\\xff.py: left out: its name is not UTF-8" in named.stderr


def test_the_headless_watch_says_so_at_start_and_on_a_save_and_keeps_running(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    named_in_bytes(ws / "kernels", b"add_\xff.py")
    watch = Headless(ws, "--no-audit", "--no-bench")
    try:
        note = watch.until(lambda e: e["type"] == "workspace_note")
        assert note["message"].endswith("add_\\xff.py: left out: its name is not UTF-8 (rename it to run it)")
        assert watch.until(lambda e: e["type"] == "run_finished")["verdict"] == "passed"  # add_triton's catch-up
        named_in_bytes(ws / "kernels", b"add_\xfe.py")
        note = watch.until(lambda e: e["type"] == "workspace_note")
        assert note["message"].endswith("add_\\xfe.py: left out: its name is not UTF-8 (rename it to run it)")
        assert watch.proc.poll() is None
    finally:
        code = watch.stop(timeout=30)
    assert code == 0, "".join(watch.stderr)
    assert not [e for e in watch.seen if e["type"] == "run_started" and "add_\\" in e["path"]]

