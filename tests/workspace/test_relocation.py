"""The one rule by which paths move to a run elsewhere and back (``ktui.workspace.relocation``)."""

import re

import pytest

from ktui.workspace.relocation import Relocation
from ktui.workspace.shipped import job_relocation, moved_job

pytestmark = pytest.mark.unit


def test_a_folder_moves_where_it_is_a_path_and_not_where_a_longer_name_begins_with_it():
    moves = Relocation({"/home/u/ws": "/remote/ws"})
    assert moves.text("/home/u/ws") == "/remote/ws"
    assert moves.text('File "/home/u/ws/k.py", line 3') == 'File "/remote/ws/k.py", line 3'
    assert moves.text("cannot read /home/u/ws.") == "cannot read /remote/ws."  # a sentence's full stop
    assert moves.text("/home/u/ws2/k.py /home/u/ws.bak /home/u/ws-old") == "/home/u/ws2/k.py /home/u/ws.bak /home/u/ws-old"


def test_the_longest_folder_wins_and_a_moved_path_is_never_moved_again():
    # the run folder lies inside the workspace; the workspace's new place contains the old one
    moves = Relocation({"/ws": "/ws/copy", "/ws/.ktui/runs/r1": "/scratch/r1"})
    assert moves.text("/ws/.ktui/runs/r1/dump.ttir") == "/scratch/r1/dump.ttir"
    assert moves.text("/ws/k.py") == "/ws/copy/k.py"


def test_back_undoes_the_move_in_every_string_of_an_event_keys_included():
    there = Relocation({"/ws": "/r/ws", "/ws/.ktui/runs/r1": "/r/runs/r1", "/outside/utils.py": "/r/outside/ab/utils.py"})
    event = {"type": "rung_finished", "message": "error in /r/ws/k.py and /r/outside/ab/utils.py",
             "figures": {"dumps": ["/r/runs/r1/k.ptx"], "/r/ws/k.py": 3, "n": 1.5}}
    assert there.back.json(event) == {
        "type": "rung_finished", "message": "error in /ws/k.py and /outside/utils.py",
        "figures": {"dumps": ["/ws/.ktui/runs/r1/k.ptx"], "/ws/k.py": 3, "n": 1.5}}


def test_an_empty_folder_name_moves_nothing():
    assert Relocation({"": "/x"}).text("a b") == "a b"


def _job(root: str, kernel: str) -> dict:
    return {"root": root, "run_dir": f"{root}/.ktui/runs/r1", "kernel_path": kernel, "reference_path": f"{root}/ref.py",
            "source": f"# {root}/k.py stays as written", "reference_files": {f"{root}/ref.py": f"# {root}"},
            "problem": {"modules": {"utils": "/outside/utils.py"}}}


def test_a_job_moves_its_paths_and_modules_but_never_its_source_texts():
    data = _job("/ws", "/ws/k.py")
    moved = moved_job(data, job_relocation(data, "/r/ws", "/r/runs/r1", {"/outside/utils.py": "/r/o/utils.py"}), "a test")
    assert (moved["kernel_path"], moved["run_dir"]) == ("/r/ws/k.py", "/r/runs/r1")
    assert moved["problem"]["modules"] == {"utils": "/r/o/utils.py"}
    assert moved["source"] == data["source"]
    assert moved["reference_files"] == {"/r/ws/ref.py": "# /ws"}  # its path moves, its text does not


def test_a_kernel_outside_the_workspace_is_refused_naming_who_sends_the_workspace_only():
    data = _job("/ws", "/elsewhere/k.py")
    with pytest.raises(ValueError, match=re.escape("/elsewhere/k.py is outside the workspace /ws: a test sends the workspace only")):
        moved_job(data, job_relocation(data, "/r/ws", "/r/run"), "a test")
