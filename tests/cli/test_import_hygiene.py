"""The parent process never loads torch or the GPU DSLs: ``ktui --help``, ``history``, ``diff``,
``context search`` and the ``ktui run`` that prints the verdicts (its worker does load them).

Each command runs as a user runs it, under ``python -X importtime``, which lists on stderr every
module the process imported (a flag of that process only: the worker it starts is not traced).
``nvidia_cutlass_dsl`` is left out of the check: CuTeDSL's ``.pth`` file imports it in ``site``,
before ktui starts; ``cutlass`` itself is what importing CuTeDSL loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, make_workspace

pytestmark = pytest.mark.worker

HEAVY = {"torch", "triton", "cutlass", "tilelang"}
COMMAND_MODULES = {"ktui.cli.run", "ktui.cli.watch", "ktui.cli.calibrate", "ktui.cli.context", "ktui.cli.history",
                   "ktui.cli.diff", "ktui.cli.profile", "ktui.cli.mcp", "ktui.cli.audit", "ktui.cli.remote"}


def imported(*args: str, cwd: Path) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules a ``ktui ARGS`` process imported, and the finished process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "ktui", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    names = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    names.discard("imported package")  # importtime's header line
    return names, proc


def heavy(names: set[str]) -> set[str]:
    return {name for name in names if name.split(".")[0] in HEAVY}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A workspace where ``ktui run --cpu`` ran one kernel (so history and diff have a version), with
    one note in context/; and the modules that run's parent imported."""
    root = make_workspace(tmp_path_factory.mktemp("hygiene") / "ws", ["add_triton"])
    (root / "context" / "notes").mkdir(parents=True)
    (root / "context" / "notes" / "tiles.md").write_text("the layout of a tile\n")
    names, proc = imported("run", "--no-audit", "--cpu", "--no-bench", "kernels/add_triton.py", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return root, names


def test_help_lists_every_command_without_loading_torch_or_any_command_module(tmp_path):
    names, proc = imported("--help", cwd=tmp_path)
    assert proc.returncode == 0 and "calibrate" in proc.stdout and "remote" in proc.stdout
    assert heavy(names) == set()
    assert names & COMMAND_MODULES == set()
    assert "textual" not in {name.split(".")[0] for name in names}
    assert "importlib.metadata" not in names  # the DSLs' entry points are read by the commands that need them


def test_the_parent_of_ktui_run_loads_neither_torch_nor_the_dashboard(ran):
    _, names = ran
    assert "ktui.dispatch.session" in names  # the parent really ran the loop
    assert heavy(names) == set()
    assert {name.split(".")[0] for name in names} & {"textual", "numpy"} == set()


@pytest.mark.parametrize("args", [
    ("history", "kernels/add_triton.py"),
    ("diff", "kernels/add_triton.py", "--base", "1"),
    ("context", "search", "layout"),
], ids=["history", "diff", "context search"])
def test_reading_commands_do_not_load_torch(ran, args):
    root, _ = ran
    names, proc = imported(*args, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert heavy(names) == set()


@pytest.mark.gpu
@pytest.mark.timing  # how soon it exits: alone on the GPU machine
def test_on_a_gpu_the_parent_of_ktui_run_loads_no_torch_and_exits_with_its_verdict(tmp_path):
    """The GPU tier's run, benchmark included: the worker holds torch and a CUDA context, the
    parent neither, and the parent is gone within a second or two of its summary line."""
    root = make_workspace(tmp_path / "ws", ["add_triton"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    with open(tmp_path / "importtime.txt", "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "ktui", "run", "--no-audit", "--bench-time", "0.5",
                                 "kernels/add_triton.py"], cwd=root, env=env, stdout=subprocess.PIPE, stderr=stderr,
                                text=True)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("add_triton v1 "):
                break
        verdict_out = time.monotonic()
        assert proc.wait(timeout=120) == 0, "".join(lines)
        exit_after_s = time.monotonic() - verdict_out
    assert "· gpu ·" in lines[0], lines[0]
    names = {line.rsplit("|", 1)[1].strip() for line in (tmp_path / "importtime.txt").read_text().splitlines()
             if line.startswith("import time:")}
    assert "ktui.dispatch.session" in names and heavy(names) == set()
    assert exit_after_s < 2.0
