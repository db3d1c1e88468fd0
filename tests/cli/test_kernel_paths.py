"""Every command that takes a kernel path resolves it as ``ktui run`` does, in every format.

``profile`` (and ``--sections``), ``sanitize``, ``diff``, ``history`` and the dashboard's ``p`` are
run on a native workspace kernel, a GPU MODE submission whose task.yml brings in ``../utils.py``
through ``files:``, and a KernelBench pair named with ``--reference`` outside any workspace. On this
CPU machine the tools say "no GPU" at once, and their pre-flight (what runs before the tool on a GPU
machine) must load the kernel in the tool's own process (its helper modules, its reference, its format);
``diff`` and ``history`` must find what ``ktui run`` recorded.
"""

from __future__ import annotations

import json
import shutil
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FIXTURES, ktui, make_workspace, parse_events

from ktui.profiling.external import preflight, prepare
from ktui.protocol.notices import ProfileFinished
from ktui.watch.profile_task import profile_task
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import kernel_for

pytestmark = pytest.mark.worker


@dataclass(frozen=True)
class Case:
    """One kernel in one format: where to stand, what to name, and what ``ktui run`` calls it."""

    cwd: Path
    path: str
    reference: tuple[str, ...]  # ``("--reference", PROBLEM)`` or nothing
    kernel_id: str
    gpu_function: str

    def args(self, *extra: str) -> tuple[str, ...]:
        return (self.path, *self.reference, *extra)


def _cases(root: Path) -> dict[str, Case]:
    native = make_workspace(root / "native", kernels=["add_triton"])
    shutil.copytree(FIXTURES / "gpumode", root / "collection")  # scaleadd/ beside the shared utils.py
    pair = root / "pair"
    pair.mkdir()
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu.py", pair / "problem.py")
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu_triton.py", pair / "candidate.py")
    return {
        "native": Case(native, "kernels/add_triton.py", (), "add_triton", "add_kernel"),
        "gpumode": Case(root / "collection" / "scaleadd", "submission.py", (), "scaleadd/submission", "scaleadd_kernel"),
        "kernelbench": Case(pair, "candidate.py", ("--reference", "problem.py"), "candidate", "scale_shift_relu_kernel"),
    }


FORMATS = ("native", "gpumode", "kernelbench")


@pytest.fixture(scope="module")
def cases(tmp_path_factory, warm_ktui) -> dict[str, Case]:
    """The three kernels, each run once by ``ktui run`` on the CPU tier (so there is a history)."""
    found = _cases(tmp_path_factory.mktemp("formats"))
    for case in found.values():
        proc = warm_ktui("run", "--no-audit", "--no-bench", "--seed", "3", *case.args(), cwd=case.cwd)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return found


@pytest.fixture(scope="module")
def tools(tmp_path_factory) -> dict[str, str]:
    """Stand-ins for ncu and compute-sanitizer that record being started: on the CPU tier the
    pre-flight must answer before either runs."""
    folder = tmp_path_factory.mktemp("bin")
    env = {}
    for name, var in (("ncu", "KTUI_NCU"), ("compute-sanitizer", "KTUI_COMPUTE_SANITIZER")):
        script = folder / name
        script.write_text(f"#!/bin/sh\ntouch {folder / (name + '.started')}\nexit 0\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        env[var] = str(script)
    return env


def _loads_in_the_tools_own_process(case: Case, tests: bool = False) -> dict:
    """The pre-flight ``profile`` and ``sanitize`` run on a GPU machine before their tool: the kernel
    loaded in ``python -m ktui.worker.target`` with its helper modules, its reference and its format."""
    reference = case.cwd / case.reference[1] if case.reference else None
    target = prepare(case.cwd / case.path, reference=reference)
    try:
        check = preflight(target, 0, tests=tests)
    finally:
        target.close()
    assert check.get("ok"), check
    assert case.gpu_function in check["kernels"], check
    return check


@pytest.mark.parametrize("fmt", FORMATS)
def test_profile_and_sanitize_say_no_gpu_before_starting_their_tool(cases, tools, fmt):
    # that they say so before loading the kernel: tests/agents/test_mcp.py, with a kernel slow to load
    case = cases[fmt]
    for verb, finished in (("profile", lambda out: parse_events(out)[-1]), ("sanitize", json.loads)):
        proc = ktui(verb, *case.args("--json"), cwd=case.cwd, env=tools)
        out = finished(proc.stdout)
        assert proc.returncode == 1 and out["ok"] is False, proc.stdout + proc.stderr
        assert out["message"].startswith("no GPU:") and "/dev/nvidia0" in out["message"], out["message"]
    assert not list(Path(tools["KTUI_NCU"]).parent.glob("*.started"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_tools_pre_flight_loads_the_kernel_as_run_does(cases, fmt):
    check = _loads_in_the_tools_own_process(cases[fmt], tests=True)
    assert check["shape_set"] == "tests"  # sanitize runs the first test shape, not a benchmark shape


@pytest.mark.parametrize("fmt", FORMATS)
def test_profile_sections_say_no_gpu_at_once(cases, fmt):
    case = cases[fmt]
    proc = ktui("profile", *case.args("--sections", "--json"), cwd=case.cwd)
    (last,) = parse_events(proc.stdout)
    assert proc.returncode == 1 and last["type"] == "profile_finished", proc.stdout + proc.stderr
    assert last["message"].startswith("no GPU: Proton's in-kernel instrumentation needs a CUDA GPU"), last


@pytest.mark.parametrize("fmt", FORMATS)
def test_history_lists_the_run_that_ktui_run_recorded(cases, fmt, warm_ktui):
    case = cases[fmt]
    proc = warm_ktui("history", *case.args("--json"), cwd=case.cwd)
    assert proc.returncode == 0, proc.stderr
    (run,) = parse_events(proc.stdout)
    assert (run["kernel"], run["version"], run["verdict"]) == (case.kernel_id, 1, "passed")


@pytest.mark.parametrize("fmt", FORMATS)
def test_diff_finds_the_sass_that_ktui_run_stored(cases, fmt, warm_ktui):
    case = cases[fmt]
    proc = warm_ktui("diff", *case.args("--base", "1", "--json"), cwd=case.cwd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    diff = json.loads(proc.stdout)
    assert (diff["kernel"], diff["base_version"], diff["new_version"], diff["identical"]) == (case.kernel_id, 1, 1, True)
    assert [f["name"] for f in diff["functions"]] == [case.gpu_function]


def test_the_pre_flight_of_a_gpumode_kernel_loads_its_task_yml_helper_modules(cases):
    """The reference imports ``utils``, which only task.yml's ``files:`` makes importable."""
    case = cases["gpumode"]
    assert "from utils import" in (case.cwd / "reference.py").read_text()
    assert not (case.cwd / "utils.py").exists()
    _loads_in_the_tools_own_process(case)


def test_a_kernelbench_pair_outside_a_workspace_needs_its_reference_named_for_every_command(cases, tools):
    case = cases["kernelbench"]
    for command in ("profile", "sanitize", "history", "diff"):
        proc = ktui(command, case.path, cwd=case.cwd, env=tools)
        assert proc.returncode == 2 and "no workspace found" in proc.stderr, (command, proc.stderr)


def test_naming_a_gpumode_kernels_own_reference_changes_neither_its_name_nor_its_history(cases):
    problem = cases["gpumode"].cwd
    solution = problem / "solutions" / "blocked" / "fast.py"  # deeper than the problem folder
    plain = kernel_for(solution)
    named = kernel_for(solution, reference=problem / "reference.py")
    assert plain.root == problem and plain.id == "scaleadd/solutions/blocked/fast"
    assert (named.id, named.root, named.reference, named.format) == (plain.id, plain.root, plain.reference, plain.format)
    assert named.problem["modules"] == plain.problem["modules"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_dashboards_profile_resolves_the_kernel_the_watch_loop_runs(cases, tools, fmt, monkeypatch):
    """``p`` spawns ``python -m ktui profile``; it must resolve the kernel as the loop did (then, here, say no GPU)."""
    case = cases[fmt]
    for var, value in tools.items():
        monkeypatch.setenv(var, value)
    if fmt == "kernelbench":  # a pair outside a workspace is what `ktui run --reference` judges
        kernel = kernel_for(case.cwd / case.path, reference=case.cwd / "problem.py")
    else:
        kernel = Workspace.at(case.cwd).kernel(case.cwd / case.path)
    assert kernel is not None and kernel.id == case.kernel_id
    notices = []

    class Loop:
        listener = staticmethod(notices.append)

    profile_task(Loop())(kernel, threading.Event())
    finished = notices[-1]
    assert isinstance(finished, ProfileFinished) and finished.ok is False
    assert finished.message.startswith("no GPU:"), finished.message
