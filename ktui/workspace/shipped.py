"""What a run on another machine receives of a workspace, and the Job as that machine sees it.

The one definition for every way a kernel is judged away from its files — ``--remote`` (synced
over ssh) and ``--ray`` (shipped as Ray objects): the workspace's files (``workspace_files``),
its calibration, the GPU MODE ``files:`` modules a problem keeps outside it (``outside_modules``,
named in a copy by ``outside_name``),
and a Job whose paths name the copy instead of the originals (``moved_job``, by the one rule of
``relocation``).
Text and paths only: nothing here imports user code.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ktui.protocol.statedir import CALIBRATION, STATE_DIR, calibration_file
from ktui.workspace.relocation import Relocation

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


def job_relocation(data: dict, new_root: str, new_run: str, placed: dict[str, str] | None = None) -> Relocation:
    """How a Job's JSON moves elsewhere: its workspace to ``new_root``, its run folder to
    ``new_run``, and each module kept outside the workspace to its copy (``placed``: original →
    copy). Its ``back`` turns what comes from there into this machine's paths."""
    return Relocation({data["run_dir"]: new_run, data["root"]: new_root, **(placed or {})})


def moved_job(data: dict, relocation: Relocation, who: str) -> dict:
    """A Job's JSON with its paths moved by ``relocation`` (``job_relocation``); its source texts
    are left as they are. ValueError when the kernel or its reference lies outside the workspace:
    ``who`` (``a remote run``) receives the workspace only."""
    out = {k: (v if k in TEXTS else relocation.json(v)) for k, v in data.items()}
    if data.get("reference_files"):  # its keys are paths, its values the texts: only the paths move
        out["reference_files"] = {relocation.text(path): text for path, text in data["reference_files"].items()}
    root = data["root"]
    for key in ("kernel_path", "reference_path"):
        if data[key] and not (data[key] == root or data[key].startswith(root + "/")):
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
