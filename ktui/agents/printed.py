"""``output``: what a kernel printed in a stored version's newest run, a page at a time.

The worker forwards the user code's stdout and stderr line by line; the report writer keeps the
first lines of each run, bounded in lines and characters, in ``<run_dir>/output.txt``
(``ktui.history.reports``), the file the dashboard's output pane shows. A run that printed
nothing has no file: the answer says so rather than failing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ktui.agents.dumps import MAX_PAGE_CHARS, page_of
from ktui.agents.workspace import BadCall
from ktui.protocol.statedir import OUTPUT_FILE

REPORT = "report.json"  # written when a run finishes, beside output.txt


def read_output(run_dir: Path, offset: int, max_chars: int) -> dict[str, Any]:
    if offset < 0 or not 1 <= max_chars <= MAX_PAGE_CHARS:
        raise BadCall(f"offset must be ≥ 0 and max_chars between 1 and {MAX_PAGE_CHARS}")
    path = run_dir / OUTPUT_FILE
    if path.is_file():
        text = path.read_text(encoding="utf-8", errors="replace")
        return {"path": str(path), "printed": True, "lines": text.count("\n"), **page_of(text, offset, max_chars)}
    if not (run_dir / REPORT).is_file():
        raise BadCall(f"no finished run in {run_dir}: call run first (the output is kept when the run ends)")
    return {"path": str(path), "printed": False, "lines": 0, **page_of("", 0, max_chars),
            "note": "the kernel printed nothing in this version's newest run"}
