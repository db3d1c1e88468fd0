"""One stored version on disk: its functions' normalised listings and their resource usage."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ktui.history.sassdiff.model import MissingSass
from ktui.history.sassdiff.normalisation import normalise
from ktui.measure.sass import instruction_count, split_functions
from ktui.protocol import statedir


@dataclass
class _Listing:
    lines: list[str]  # normalised
    resources: dict[str, Any]
    instructions: int | None = None  # ``measure.sass.instruction_count`` of the raw listing


def load_version(state_dir: Path, kernel: str, version: int) -> dict[str, _Listing]:
    """``{function: listing}`` for one stored version, from its ``*.sass`` and ``resources.json``."""
    run_dir = statedir.run_dir(state_dir, kernel, version)
    sass_files = sorted(run_dir.glob("*.sass")) if run_dir.is_dir() else []
    if not sass_files:
        raise MissingSass(
            f"{kernel} v{version} has no SASS in {run_dir}: its last run stopped before the dumps rung, "
            f"or it was never run", cli="see `ktui history`", dashboard="its rungs are in pane 2",
            agents="the history tool shows why"
        )
    try:
        resources = json.loads((run_dir / "resources.json").read_text())
    except (OSError, ValueError):
        resources = {}
    functions: dict[str, _Listing] = {}
    for path in sass_files:
        for name, lines in split_functions(path.read_text(encoding="utf-8", errors="replace")).items():
            functions[name] = _Listing(normalise(lines, name), resources.get(name, {}), instruction_count(lines))
    return functions
