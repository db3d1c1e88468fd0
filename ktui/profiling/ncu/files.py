"""The summary on disk: ``ncu.json`` and ``ncu.txt`` in a version's run folder under ``.ktui/runs/``."""

from __future__ import annotations

import json
from pathlib import Path

from ktui.profiling.ncu.summary import NcuSummary
from ktui.protocol import statedir
from ktui.protocol.files import write_atomic

SUMMARY_FILE = "ncu.json"
TEXT_FILE = "ncu.txt"
REPORT_STEM = "profile"  # ncu -o <run_dir>/profile → profile.ncu-rep


def write(run_dir: Path, summary: NcuSummary) -> None:

    write_atomic(Path(run_dir) / SUMMARY_FILE, json.dumps(summary.to_json(), indent=2))
    write_atomic(Path(run_dir) / TEXT_FILE, summary.text() + "\n")


def load(run_dir: Path) -> NcuSummary | None:
    """The profile stored in ``<run_dir>/ncu.json``; None when there is none (or it is unreadable)."""
    path = Path(run_dir) / SUMMARY_FILE
    try:
        return NcuSummary.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def latest(state_dir: Path, kernel: str) -> NcuSummary | None:
    """The newest profile of any version of ``kernel``."""
    runs = statedir.runs_of(state_dir, kernel)
    if not runs.is_dir():
        return None
    found = [s for s in (load(d) for d in runs.iterdir() if d.is_dir()) if s is not None]
    return max(found, key=lambda s: s.created, default=None)
