"""Shared helpers: throwaway workspaces built from the shipped examples and the fixtures."""

from __future__ import annotations

import _posixsubprocess
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def make_workspace(root: Path, kernels: list[str] = (), fixtures: list[str] = (), hacks: list[str] = ()) -> Path:
    """A workspace at ``root`` with the shipped references + fixture references, and the
    named shipped kernels (``kernels/<name>.py``), fixture kernels and reward-hacking kernels."""
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / "references").mkdir(exist_ok=True)
    for ref in [*(REPO / "references").glob("*.py"), *(FIXTURES / "references").glob("*.py")]:
        shutil.copy(ref, root / "references" / ref.name)
    for name in kernels:
        shutil.copy(REPO / "kernels" / f"{name}.py", root / "kernels" / f"{name}.py")
    for name in fixtures:
        shutil.copy(FIXTURES / "kernels" / f"{name}.py", root / "kernels" / f"{name}.py")
    for name in hacks:
        shutil.copy(FIXTURES / "hacks" / f"{name}.py", root / "kernels" / f"hack_{name}.py")
    return root


def child_env(env: dict | None = None) -> dict:
    """The environment of a ktui process a test starts: this one's, with the checkout first on a
    ``PYTHONPATH`` that keeps what was on it (on the GPU machine textual and watchdog come from it)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **(env or {})}


def ktui(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, as a user or an agent would."""
    return subprocess.run(
        [sys.executable, "-m", "ktui", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env=child_env(env)
    )


class WarmRunner:
    """One warm worker for the whole session, for tests that need "a run" of the CLI and nothing of
    its process: started once, it may write every run folder and read every workspace under pytest's
    temp folder (so a new workspace there does not replace it, as it would a user's worker), and only
    the session closes it. Tests about crashes, time limits, confinement or isolation keep workers
    of their own."""

    def __init__(self, under: Path):
        from ktui.dispatch.runner import WorkerConfig, WorkerRunner

        under = under.resolve()

        class Shared(WorkerRunner):
            def _allow_writes(self, job) -> bool:
                from ktui.protocol.statedir import runs_root

                runs = runs_root(job.run_dir) if job.run_dir else None
                if runs is not None and Path(runs).resolve().is_relative_to(under):
                    return False  # writable from its start
                return super()._allow_writes(job)

            def _allow_reads(self, job) -> bool:
                if Path(job.root).resolve().is_relative_to(under):
                    return False  # readable from its start
                return super()._allow_reads(job)

            def close(self) -> None:
                pass  # each `ktui run` closes its runner: this one is the session's

            def shut(self) -> None:
                WorkerRunner.close(self)

        # this host's default worker, and the CPU tier's (--cpu); each starts on its first run
        # it reads the session's folder whole: each entry of the folder above it (a workspace may be
        # a test's own temp folder, which a user's worker would not read as an entry of another)
        self.runners = {cpu: Shared(WorkerConfig(force_cpu=cpu, writable=(str(under),), readable=(str(under.parent),)))
                        for cpu in (False, True)}

    def shut(self) -> None:
        for runner in self.runners.values():
            runner.shut()

    def source(self, placement, root):
        """The runners of a plain run (this host's default worker or ``--cpu``, one process for
        every kernel): the session's warm worker; None for any other placement (the CLI builds it)."""
        plain = not (placement.cold or placement.gpus or placement.arch or placement.remote or placement.ray)
        return [self.runners[placement.cpu]] if plain else None


@pytest.fixture(scope="session")
def warm_ktui(tmp_path_factory):
    """``ktui(...)`` in this process through the CLI's ``main()``, its runs on the session's warm
    worker: the same arguments, working folder, environment, streams and exit status as a
    subprocess, without a Python start-up and a worker start (torch) per call."""
    import contextlib
    import io

    from ktui.cli.main import main

    warm = WarmRunner(tmp_path_factory.getbasetemp())

    def run(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
        out, err = io.StringIO(), io.StringIO()
        saved_env, saved_cwd = dict(os.environ), os.getcwd()
        try:
            os.environ.update(env or {})
            os.chdir(cwd)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(list(args), runners=warm.source)
                except SystemExit as exc:  # argparse's errors
                    code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
        return subprocess.CompletedProcess(["ktui", *args], code, out.getvalue(), err.getvalue())

    yield run
    warm.shut()


def parse_events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def by_kernel(events: list[dict]) -> dict[str, list[dict]]:
    """Group a --json stream by kernel id (runs are sequential, so a run_id maps to one kernel)."""
    kernel_of = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    grouped: dict[str, list[dict]] = {}
    for e in events:
        grouped.setdefault(kernel_of[e["run_id"]], []).append(e)
    return grouped


def rungs(events: list[dict]) -> dict[str, dict]:
    return {e["rung"]: e for e in events if e["type"] == "rung_finished"}


def finished(events: list[dict]) -> dict:
    return next(e for e in events if e["type"] == "run_finished")


@pytest.fixture(scope="session", autouse=True)
def private_user_dir(tmp_path_factory):
    """ktui's per-user folder (``protocol.statedir.user_dir``) is the session's own: no test reads
    or writes the real user's, and every process a test starts inherits it."""
    if os.environ.get("KTUI_USER_DIR"):
        yield Path(os.environ["KTUI_USER_DIR"])
        return
    folder = tmp_path_factory.mktemp("user-dir")
    os.environ["KTUI_USER_DIR"] = str(folder)
    yield folder
    os.environ.pop("KTUI_USER_DIR", None)


@pytest.fixture(scope="session", autouse=True)
def no_daemon():
    """Every command a test runs is one-shot (``KTUI_NO_DAEMON=1``), as before the workspace daemon:
    a test's processes end with it, so the checks for processes left behind stay exact. The
    daemon's own tests (tests/cli/test_daemon.py) ask for it in the commands they start."""
    saved = os.environ.get("KTUI_NO_DAEMON")
    os.environ["KTUI_NO_DAEMON"] = "1"
    yield
    if saved is None:
        os.environ.pop("KTUI_NO_DAEMON", None)
    else:
        os.environ["KTUI_NO_DAEMON"] = saved


@pytest.fixture
def workspace(tmp_path: Path):
    def build(kernels: list[str] = (), fixtures: list[str] = ()) -> Path:
        return make_workspace(tmp_path / "ws", kernels, fixtures)

    return build


# -- tiers: what a test starts ------------------------------------------------------------------
# Every test has exactly one tier, as a marker (module-level ``pytestmark`` or on the test):
#   unit    starts no process (checked: a unit test that starts one fails, see refuse_processes)
#   worker  starts a ktui worker or another subprocess (the CLI, a compiler, a profiler's target)
#   e2e     starts sshd, Ray, tmux or the live dashboard in a terminal
# The inner loop is ``python3 -m pytest -m unit``; ``gpu`` is orthogonal (deselected by default).
TIERS = ("unit", "worker", "e2e")


def tier_problems(items) -> list[str]:
    """Tests without exactly one tier marker, each with the tiers it has. A GPU test is never
    ``unit``: the GPU is reached through a worker, never from the test's own process."""
    problems = []
    for item in items:
        names = {mark.name for mark in item.iter_markers()}
        tiers = sorted(names & set(TIERS))
        if len(tiers) != 1:
            problems.append(f"{item.nodeid}: {', '.join(tiers) or 'no tier'}")
        elif tiers == ["unit"] and "gpu" in names:
            problems.append(f"{item.nodeid}: unit and gpu")
    return problems


@pytest.hookimpl(tryfirst=True)  # before -m deselects any: every collected test is checked
def pytest_collection_modifyitems(config, items):
    problems = tier_problems(items)
    if problems:
        raise pytest.UsageError(
            "every test needs exactly one tier marker (unit, worker or e2e; tests/conftest.py says which):\n  "
            + "\n  ".join(problems)
        )
    # GPU tests run only when asked for (-m gpu, -m 'gpu and worker'): -m unit or -m worker alone
    # leaves them out, as the default run does.
    if "gpu" not in (config.option.markexpr or ""):
        gpu = [item for item in items if item.get_closest_marker("gpu") is not None]
        if gpu:
            config.hook.pytest_deselected(items=gpu)
            items[:] = [item for item in items if item.get_closest_marker("gpu") is None]


def pytest_xdist_auto_num_workers(config):
    """How many pytest processes ``-n auto`` (the default options) starts: two, the cores CI has (a
    test mostly waits on the subprocesses it started), and one for GPU tests, which share one GPU
    and time kernels on it."""
    if "gpu" in (config.option.markexpr or ""):
        return 0
    return max(1, min(2, os.cpu_count() or 1))


class ProcessStarted(AssertionError):
    """A test marked ``unit`` started a process: it belongs to the ``worker`` or ``e2e`` tier."""


@pytest.fixture(autouse=True)
def refuse_processes(request, monkeypatch):
    """The ``unit`` tier's promise, kept: starting a process there fails the test."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return

    def refused(*args, **kwargs):
        raise ProcessStarted(f"{request.node.nodeid} is marked unit but started a process; mark it worker or e2e")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refused)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", refused)  # multiprocessing's spawn, too
    monkeypatch.setattr(os, "fork", refused)
    monkeypatch.setattr(os, "posix_spawn", refused)
    monkeypatch.setattr(os, "posix_spawnp", refused)
    yield


@pytest.fixture(autouse=True)
def no_process_left_behind(request, tmp_path_factory):
    """A test that starts processes leaves no ktui command or worker running once it is over: an
    orphan working in this session's temporary folders, still alive 30 s after the test, fails it
    (and is killed, so it cannot slow the next)."""
    if request.node.get_closest_marker("unit") is not None:
        yield
        return
    from leftovers import left_behind, processes

    before = set(processes())
    yield
    leaked = left_behind(before, within=str(tmp_path_factory.getbasetemp()))
    if leaked:
        pytest.fail("left running after the test (now killed):\n  "
                    + "\n  ".join(f"pid {p.pid}: {' '.join(p.argv)}" for p in leaked), pytrace=False)
