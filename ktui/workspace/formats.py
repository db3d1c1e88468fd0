"""Which format a problem is in, read from files as text (parent side: no user code runs here).

- native: ``references/<op>.py`` with ``generate_input``, ``ref_kernel``, ``TESTS``.
- GPU MODE: a folder holding ``reference.py`` and ``task.yml``; its kernels are ``submission*.py``
  beside them and every file under ``solutions/``.
- KernelBench: a problem file defining ``class Model`` and ``get_inputs()``; its candidates define
  ``class ModelNew``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.protocol.job import GPUMODE, KERNELBENCH, NATIVE
from ktui.protocol.sourcelines import parse as parse_python

GPUMODE_REFERENCE = "reference.py"
GPUMODE_TASK = "task.yml"
GPUMODE_SOLUTIONS = "solutions"
SUBMISSION_MARKER = "@SUBMISSION@"


class FormatError(Exception):
    """A problem's own files are malformed (e.g. an unreadable task.yml); the message says where."""


# -- GPU MODE layout -----------------------------------------------------------------------------
def is_gpumode_problem(folder: Path) -> bool:
    return (folder / GPUMODE_REFERENCE).is_file() and (folder / GPUMODE_TASK).is_file()


def gpumode_problem_dir(path: Path) -> Path | None:
    """The GPU MODE problem folder ``path`` is, or lies in (nearest first), else None."""
    path = path.resolve()
    start = path if path.is_dir() else path.parent
    for folder in (start, *start.parents):
        if is_gpumode_problem(folder):
            return folder
    return None


def is_gpumode_candidate(problem_dir: Path, path: Path) -> bool:
    """``submission*.py`` beside the reference, or any public ``.py`` under ``solutions/``."""
    rel = path.resolve().relative_to(problem_dir)
    if any(part.startswith(("_", ".")) for part in rel.parts) or path.suffix != ".py":
        return False
    if len(rel.parts) == 1:
        return rel.name.startswith("submission")
    return rel.parts[0] == GPUMODE_SOLUTIONS


def gpumode_candidates(problem_dir: Path) -> list[Path]:
    found = sorted(problem_dir.glob("submission*.py"))
    solutions = problem_dir / GPUMODE_SOLUTIONS
    if solutions.is_dir():
        found += sorted(solutions.rglob("*.py"))
    return [p.resolve() for p in found if is_gpumode_candidate(problem_dir, p)]


@dataclass(frozen=True)
class GpuModeTask:
    """What ktui needs from ``task.yml``: its cases, and the modules its ``files:`` list brings in."""

    problem_dir: Path
    tests: list[dict[str, Any]]
    benchmarks: list[dict[str, Any]]
    modules: dict[str, Path]  # import name → file, e.g. {"utils": <problem>/../utils.py}

    @property
    def dependencies(self) -> tuple[Path, ...]:
        """Files besides the reference whose edit changes the verdict."""
        task = self.problem_dir / GPUMODE_TASK
        return (task, *sorted({p for p in self.modules.values() if p != self.problem_dir / GPUMODE_REFERENCE}))

    def to_job(self) -> dict[str, Any]:
        """The JSON form carried to the worker in ``Job.problem``."""
        return {
            "problem_dir": str(self.problem_dir),
            "tests": self.tests,
            "benchmarks": self.benchmarks,
            "modules": {name: str(path) for name, path in self.modules.items()},
        }


def read_task(problem_dir: Path) -> GpuModeTask:
    """Parse ``task.yml``: ``tests``/``benchmarks`` shape lists and the ``files:`` it names."""
    import yaml

    task_path = problem_dir / GPUMODE_TASK
    where = f"{problem_dir.name}/{GPUMODE_TASK}"
    try:
        data = yaml.safe_load(task_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FormatError(f"{where}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise FormatError(f"{where}: not valid YAML{line}: {problem}") from exc
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected a mapping with tests: and benchmarks:, got {type(data).__name__}")
    tests = _cases(data.get("tests"), "tests", where, required=True)
    benchmarks = _cases(data.get("benchmarks"), "benchmarks", where, required=False)
    return GpuModeTask(problem_dir, tests, benchmarks, _modules(data.get("files"), problem_dir, where))


def _cases(value: Any, key: str, where: str, required: bool) -> list[dict]:
    """The cases as task.yml lists them, their ``seed`` included: the worker keeps each one as the
    problem's own seed and draws fresh ones around them (``ktui.worker.seeds``)."""
    if value is None:
        if required:
            raise FormatError(f"{where}: no {key}: list (each entry is the keyword arguments of generate_input)")
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise FormatError(f"{where}: {key}: must be a list of mappings like {{size: 1024, seed: 42}}")
    if required and not value:
        raise FormatError(f"{where}: {key}: is empty")
    return list(value)


def _modules(value: Any, problem_dir: Path, where: str) -> dict[str, Path]:
    """``files: [{name: utils.py, source: ../utils.py}, …]`` → ``{"utils": <resolved source>}``."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise FormatError(f"{where}: files: must be a list of {{name: ..., source: ...}}")
    modules: dict[str, Path] = {}
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("source"), str):
            raise FormatError(f"{where}: files: entry {entry!r} needs a name and a source")
        name, source = entry["name"], entry["source"]
        if source == SUBMISSION_MARKER or not name.endswith(".py"):
            continue  # the candidate itself, or a data file: nothing to import
        path = (problem_dir / source).resolve()
        if not path.is_file():
            raise FormatError(f"{where}: files: {name} comes from {source}, which does not exist")
        modules[name.removesuffix(".py").replace("/", ".")] = path
    return modules


# -- the reference file decides between native and KernelBench -----------------------------------
def reference_format(path: Path) -> str:
    """The format of a reference file: GPU MODE by its folder, KernelBench by its definitions."""
    path = path.resolve()
    if path.name == GPUMODE_REFERENCE and is_gpumode_problem(path.parent):
        return GPUMODE
    try:
        tree = parse_python(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return NATIVE  # the worker reports the syntax error against the file
    names = top_level_names(tree)
    if "Model" in names and "get_inputs" in names and "ref_kernel" not in names:
        return KERNELBENCH
    return NATIVE


def top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names
