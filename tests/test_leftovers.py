"""The suite's own guard against leaked processes (tests/leftovers.py) finds what it should."""

from __future__ import annotations

import subprocess
import sys

import pytest
from leftovers import is_ktui, left_behind, orphans, processes
from waits import gone, until


@pytest.mark.unit
@pytest.mark.parametrize("argv, expected", [
    (["/usr/bin/python3", "-m", "ktui", "watch", ".", "--seed", "0"], True),
    (["python3", "-m", "ktui.worker.main"], True),
    (["/venv/bin/ktui", "run", "kernels/"], True),
    (["python3", "/venv/bin/ktui", "serve"], True),
    (["python3", "-m", "pytest", "tests/ktui"], False),
    (["vim", "ktui.py"], False),
    ([], False),
])
def test_ktui_commands_and_workers_are_recognised_by_their_argv(argv, expected):
    assert is_ktui(argv) is expected


@pytest.mark.worker
def test_an_orphan_started_during_a_test_is_found_killed_and_a_child_is_not(tmp_path):
    before = set(processes())
    marker = "ktui-leftovers-probe"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    # the orphan: started by a shell that exits at once, so it is re-parented away from pytest
    subprocess.run(["sh", "-c", f'{sys.executable} -c "import time; time.sleep(60)" {marker} & '],
                   check=True, cwd=tmp_path)
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    subprocess.run(["sh", "-c", f'{sys.executable} -c "import time; time.sleep(60)" {marker}-elsewhere & '],
                   check=True, cwd=elsewhere)
    try:
        probe = lambda argv: marker in argv  # noqa: E731
        other = lambda argv: f"{marker}-elsewhere" in argv  # noqa: E731
        assert until(lambda: orphans(before, probe) and orphans(before, other))
        assert orphans(before, other, within=str(tmp_path)) == []  # another folder's: not this test's
        (found,) = left_behind(before, grace_s=0.5, matches=probe, within=str(tmp_path))
        assert found.pid != child.pid
        assert gone(lambda: orphans(before, probe)) == []  # killed
        assert child.poll() is None  # pytest's own child is left alone
        left_behind(before, grace_s=0, matches=other)  # the other one, killed too
    finally:
        child.kill()
        child.wait()
