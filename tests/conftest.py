"""Shared helpers: throwaway workspaces built from the shipped examples and the fixtures."""

from __future__ import annotations

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


def ktui(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess, as a user or an agent would."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ktui", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=full_env
    )


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


@pytest.fixture
def workspace(tmp_path: Path):
    def build(kernels: list[str] = (), fixtures: list[str] = ()) -> Path:
        return make_workspace(tmp_path / "ws", kernels, fixtures)

    return build
