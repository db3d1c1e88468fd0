"""The ``.ktui/`` folder of a workspace: the one place that spells its layout.

Everything ktui shows is also a file here, for agents to read::

    .ktui/history.db                    every run of every version (SQLite)
    .ktui/latest/<kernel>.json          the newest finished report of a kernel
    .ktui/runs/<kernel>/<version>/      one version's dumps, report.json, output.txt (what the
                                        kernel printed), profiles, sanitizer logs
    .ktui/calibration.json              the device's measured ceilings, when this workspace keeps its own
    .ktui/audits/<reference hash>.json  ``ktui audit``'s verdict on one version of a reference

What outlives one workspace (what is the same for every workspace of one user on one machine)
lies in the user's own folder, ``user_dir()``::

    <user dir>/calibration/<device key>.json   one GPU kind's measured ceilings and launch floor
    <user dir>/compilers/               the compiler caches user code may write (Triton's, TileLang's,
                                        CuTeDSL's, CUDA's, torch's): ktui's own, used only by confined
                                        processes (``ktui.worker.confine.caches``)

What user code may read of a workspace is every entry of its root but the state folder and hidden
ones (``readable_entries``): the kernels, the references and their helpers, never ``.ktui/``
beyond the run folders it writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

STATE_DIR = ".ktui"
STATE_DIR_ENV = "KTUI_STATE_DIR"  # ``--state-dir``: the folder used instead of ``<root>/.ktui``
USER_DIR_ENV = "KTUI_USER_DIR"  # the folder used instead of the platform's user cache folder
HISTORY_DB = "history.db"
CALIBRATION = "calibration.json"
CALIBRATIONS = "calibration"  # in ``user_dir()``: one file per device kind, shared by every workspace
RUNS = "runs"
OUTPUT_FILE = "output.txt"  # in a run folder: what the kernel printed in its newest run


class StateError(Exception):
    """The state folder or its history cannot be used; the message names the file and what to do
    (``ktui`` says it in one line and exits 2)."""


def state_folder(root: Path) -> Path:
    """``<root>/.ktui`` (or ``$KTUI_STATE_DIR``, set by ``--state-dir``), not created: where to read."""
    override = os.environ.get(STATE_DIR_ENV)
    return Path(override) if override else Path(root) / STATE_DIR


def state_dir(root: Path) -> Path:
    """``state_folder(root)``, created on first use with a .gitignore so it never gets committed.
    One that exists but cannot be written (a read-only workspace) is still returned, to be read;
    one that cannot be made raises StateError."""
    state = state_folder(root)
    try:
        state.mkdir(parents=True, exist_ok=True)
        ignore = state / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")
    except OSError as exc:
        if state.is_dir():
            return state
        raise StateError(f"cannot make {state} ({exc.strerror}): keep ktui's state elsewhere with "
                         "--state-dir DIR") from None
    return state


def history_db(state: Path) -> Path:
    return Path(state) / HISTORY_DB


def runs_folder(root: Path) -> Path:
    """``<root>/.ktui/runs``, not created: every run folder of the workspace, what its workers may write."""
    return Path(root).resolve() / STATE_DIR / RUNS


def runs_of(state: Path, kernel: str) -> Path:
    """The folder holding every stored version of ``kernel``."""
    return Path(state) / RUNS / kernel


def runs_root(run_folder: str | Path) -> Path | None:
    """The ``runs`` folder a run folder lies in (``<state>/runs/<kernel>/<version>``, the state
    being ``.ktui`` or a ``--state-dir``): where a worker may write; None if it lies in none. The
    nearest one above it, so a user's folder of that name further up is never taken for it."""
    for folder in Path(run_folder).parents:
        if folder.name == RUNS:
            return folder.resolve()
    return None


def run_dir(state: Path, kernel: str, version: int) -> Path:
    return runs_of(state, kernel) / str(version)


def latest_report(state: Path, kernel: str) -> Path:
    return Path(state) / "latest" / f"{kernel}.json"


def audit_file(state: Path, reference_hash: str) -> Path:
    """The cached audit of one version of a reference: the same hash a run of its kernels records."""
    return Path(state) / "audits" / f"{reference_hash}.json"


def calibration_file(root: Path) -> Path:
    return Path(root) / STATE_DIR / CALIBRATION


def readable_entries(folder: Path, states: Iterable[Path] = ()) -> list[Path]:
    """What user code may read of a workspace ``folder``: its entries but hidden ones (``.ktui``,
    ``.git``, a dotfile), ``states`` (a ``--state-dir`` inside it) and folders holding a state
    folder of their own (another workspace); none where it cannot be listed."""
    refused = {Path(s).resolve() for s in states}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    entries = []
    for name in names:
        entry = Path(folder) / name
        if name.startswith(".") or entry.resolve() in refused or (entry / STATE_DIR).is_dir():
            continue
        entries.append(entry)
    return entries


def compiler_caches() -> Path:
    """ktui's compiler caches, shared by the confined processes of every workspace of this user;
    not created."""
    return user_dir() / "compilers"


def user_dir() -> Path:
    """ktui's per-user folder, shared by every workspace of this user on this machine, not created:
    ``$KTUI_USER_DIR``, else ``$XDG_CACHE_HOME/ktui``, else ``~/.cache/ktui`` (the platform's user
    cache folder on Linux; ``~/Library/Caches/ktui`` on macOS)."""
    override = os.environ.get(USER_DIR_ENV)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "ktui"
    home = Path.home()
    if os.uname().sysname == "Darwin":
        return home / "Library" / "Caches" / "ktui"
    return home / ".cache" / "ktui"


def user_calibrations() -> Path:
    """``<user_dir>/calibration``, not created: each GPU kind's calibration, one file per device key
    (``ktui.measure.calibrate``); the worker reads it and never writes it (``ktui.worker.confine``):
    the measuring process keeps what it measured there."""
    return user_dir() / CALIBRATIONS
