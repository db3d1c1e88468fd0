"""What a run on another machine receives of a workspace, and the Job as that machine sees it.

The one definition for every way a kernel is judged away from its files — ``--remote`` (synced
over ssh) and ``--ray`` (shipped as Ray objects): the workspace's files (``workspace_files``),
its calibration, the GPU MODE ``files:`` modules a problem keeps outside it (``outside_modules``,
named in a copy by ``outside_name``),
and a Job whose paths name the copy instead of the originals (``moved_job``, ``moved_modules``).
Text and paths only: nothing here imports user code.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from ktui.protocol.statedir import CALIBRATION, STATE_DIR, calibration_file

MAX_FILES = 5000
TEXTS = ("source", "reference_files")  # a Job's file texts: never rewritten as paths
MAX_BYTES = 512 * 1024 * 1024
SKIPPED = {"__pycache__", "node_modules"}


def workspace_files(root: Path) -> list[str]:
    """What a kernel may import or read from its workspace: every file below ``root`` outside
    hidden folders (``.ktui/``, ``.git/``), caches and virtual environments, relative to it."""
    found: list[str] = []
    total = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED
                         and not (Path(folder) / d / "pyvenv.cfg").is_file())
        for name in sorted(files):
            path = Path(folder) / name
            if name.startswith(".") or not path.is_file() or path.is_symlink():
                continue
            found.append(path.relative_to(root).as_posix())
            total += path.stat().st_size
            if len(found) > MAX_FILES or total > MAX_BYTES:
                raise ValueError(f"{root}: more than {MAX_FILES} files or {MAX_BYTES >> 20} MiB to send to another "
                                 "machine; run from the kernels' own workspace folder")
    return found


def run_files(root: Path) -> list[str]:
    """Everything a run elsewhere needs of the workspace at ``root``: its files and, where
    ``ktui calibrate`` measured one, its calibration (the benchmark there uses those ceilings)."""
    names = workspace_files(root)
    if calibration_file(Path(root)).is_file():
        names.append(f"{STATE_DIR}/{CALIBRATION}")
    return names


def moved_job(data: dict, root: str, new_root: str, run_dir: str, new_run: str, who: str) -> dict:
    """A Job's JSON with its workspace paths under ``new_root`` and its run folder at ``new_run``
    (the source texts are left as they are). ValueError when the kernel or its reference lies outside
    the workspace: ``who`` (``a remote run``) receives the workspace only."""
    def move(value: Any) -> Any:
        if isinstance(value, str):
            if value == run_dir or value.startswith(run_dir + "/"):
                return new_run + value[len(run_dir):]
            if value == root or value.startswith(root + "/"):
                return new_root + value[len(root):]
            return value
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        if isinstance(value, list):
            return [move(v) for v in value]
        return value

    out = {k: (v if k in TEXTS else move(v)) for k, v in data.items()}
    if data.get("reference_files"):  # its keys are paths, its values the texts: only the paths move
        out["reference_files"] = {move(path): text for path, text in data["reference_files"].items()}
    for key in ("kernel_path", "reference_path"):
        if data[key] and out[key] == data[key]:
            raise ValueError(f"{data[key]} is outside the workspace {root}: {who} sends the workspace only")
    return out


def outside_modules(root: str, problems: list[dict]) -> list[str]:
    """The GPU MODE ``files:`` modules of the Jobs' ``problems`` that lie outside the workspace at
    ``root`` (a problem folder whose task.yml names ``../utils.py``), sorted: they travel too."""
    return sorted({path for problem in problems for path in (problem.get("modules") or {}).values()
                   if not (path == root or path.startswith(root + "/"))})


def outside_name(original: str) -> str:
    """Where the copy of a module kept outside the workspace lies, relative to the folder that
    holds such copies: a folder named by its path's hash, so two ``utils.py`` never meet."""
    digest = hashlib.sha256(original.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return f"{digest}/{Path(original).name}"


def moved_modules(data: dict, placed: dict[str, str]) -> dict:
    """A Job's JSON whose problem modules at the paths of ``placed`` (original → copy) name the
    copies, in its reference snapshot too (a ``files:`` module is part of what judges the kernel)."""
    modules = (data.get("problem") or {}).get("modules")
    if not modules:
        return data
    moved = {name: placed.get(path, path) for name, path in modules.items()}
    files = {placed.get(path, path): text for path, text in (data.get("reference_files") or {}).items()}
    return {**data, "problem": {**data["problem"], "modules": moved}, "reference_files": files}
