"""A workspace whose history holds benchmark runs an NVIDIA H200 recorded, and the calibration they
ran under (tests/fixtures/gpu/roofline, built by its make_history.py from docs/measured.md).

The CPU tests have no GPU: the roofline chart and ``ktui history --json``'s points are tested on
these recorded figures, replayed into a fresh history store at a fixed clock.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import FIXTURES, REPO, make_workspace

from ktui.history.store import Store
from ktui.protocol.events import RunStarted, event_from_json
from ktui.protocol.statedir import calibration_file
from ktui.workspace.kernels import state_dir

RECORDED = FIXTURES / "gpu" / "roofline"
KERNELS = ("add_triton", "softmax_triton", "rmsnorm_triton", "gemm_bf16_triton")
AFTER_LAST_EVENT_S = 3600.0


def replay_h200_history(root: Path) -> tuple[Path, float]:
    """The workspace at ``root`` (the shipped kernels as they are: each one's last recorded version),
    its history and calibration; return it and the fixed "now" for a dashboard's clock."""
    ws = make_workspace(root, kernels=list(KERNELS))
    state = state_dir(ws)
    store = Store(state / "history.db")
    last = 0.0
    for line in (RECORDED / "history.jsonl").read_text().splitlines():
        event = event_from_json(json.loads(line.replace("{ROOT}", str(ws))))
        if isinstance(event, RunStarted):
            assert store.version_for(event.kernel, event.content_hash, event.path) == event.version
        store.record(event)
        last = max(last, event.time)
    store.close()
    calibration_file(ws).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(RECORDED / "calibration.json", calibration_file(ws))
    for kernel in KERNELS:  # the shipped file is each kernel's last version: not stale
        assert (ws / "kernels" / f"{kernel}.py").read_text() == (REPO / "kernels" / f"{kernel}.py").read_text()
    return ws, last + AFTER_LAST_EVENT_S
