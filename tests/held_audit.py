"""A reference whose audit waits for a file: the shipped ``add`` problem, but the audit's process (and
only it: a run's worker imports the reference at once) waits at the reference's import until the
workspace holds ``audit.go``. A caller that answers while that file is absent has not waited for
the audit; the test writes the file when it wants the audit to finish."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import REPO

KERNEL = "kernels/heldaudit_triton.py"
REFERENCE = "references/heldaudit.py"

_HELD = '''
import sys as _sys
import time as _time
from pathlib import Path as _Path

_main = getattr(_sys.modules.get("__main__"), "__spec__", None)
if _main is not None and _main.name.startswith("ktui.worker.audit"):  # the audit's process, not a run's worker
    while not _Path({go!r}).exists():
        _time.sleep(0.05)
'''


def held_audit(ws: Path) -> Path:
    """``kernels/heldaudit_triton.py`` (the shipped Triton add) against ``references/heldaudit.py``
    (the shipped add reference, its audit held) in the workspace ``ws``; the file that releases the audit."""
    go = ws / "audit.go"
    reference = (REPO / "references" / "add.py").read_text()
    (ws / REFERENCE).parent.mkdir(parents=True, exist_ok=True)
    (ws / REFERENCE).write_text(reference + _HELD.format(go=str(go)))
    (ws / KERNEL).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "kernels" / "add_triton.py", ws / KERNEL)
    kernel = ws / KERNEL
    kernel.write_text(kernel.read_text().replace('REFERENCE = "add"', 'REFERENCE = "heldaudit"'))
    return go


def audit_records(ws: Path) -> list[Path]:
    return sorted((ws / ".ktui" / "audits").glob("*.json"))
