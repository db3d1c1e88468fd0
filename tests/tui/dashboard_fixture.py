"""A workspace whose history is the recorded CPU runs in tests/fixtures/dashboard/cpu (see record.py).

Snapshot tests replay the recorded event stream into a fresh history store, put the recorded
kernels and run-folder files in place, and show the dashboard at a fixed clock, so the screen is
the same on every machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import FIXTURES, make_workspace

from ktui.history.reports import ReportWriter
from ktui.history.store import Store
from ktui.protocol.events import RunStarted, event_from_json
from ktui.workspace.kernels import state_dir

RECORDED = FIXTURES / "dashboard" / "cpu"
# The clock the snapshots are taken at: this long after the last recorded event.
AFTER_LAST_EVENT_S = 150.0


def replay_cpu_history(root: Path, recorded: Path = RECORDED) -> tuple[Path, float]:
    """Build the workspace at ``root`` from a recording (record.py's ``cpu``, or ``errormap``);
    return it and the fixed "now" for the app's clock."""
    ws = make_workspace(root)
    for kernel in (recorded / "kernels").glob("*.py"):
        shutil.copy(kernel, ws / "kernels" / kernel.name)
    state = state_dir(ws)
    store = Store(state / "history.db")
    writer = ReportWriter(state)
    last = 0.0
    for line in (recorded / "events.jsonl").read_text().splitlines():
        event = event_from_json(json.loads(line.replace("{ROOT}", str(ws))))
        if isinstance(event, RunStarted):  # versions are numbered when a run is prepared
            assert store.version_for(event.kernel, event.content_hash, event.path) == event.version
        store.record(event)
        writer(event)
        last = max(last, event.time)
    store.close()
    for f in (recorded / "runs").rglob("*"):
        if f.is_file():
            dest = state / "runs" / f.relative_to(recorded / "runs")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(f.read_text().replace("{ROOT}", str(ws)))
    return ws, last + AFTER_LAST_EVENT_S


# -- GPU-shaped history, synthetic -----------------------------------------------------------------
# There is no GPU where these tests run, so speedups cannot be recorded here. To test how the
# speedup chart, the speedup columns and the ncu pane draw, this writes a *synthetic* history for
# one extra kernel (softmax_h200): the figures below are made up for layout, not measurements.
SYNTHETIC_GPU = [  # version, verdict, speedup, roofline fraction
    (1, "passed", 1.12, 0.41),
    (2, "failed", None, None),
    (3, "passed", 1.86, 0.68),
    (4, "passed", 2.31, 0.84),
    (5, "suspicious", None, None),
    (6, "passed", 2.05, 0.75),
]


def add_synthetic_gpu_history(ws: Path, now: float) -> str:
    """Add ``kernels/softmax_h200.py`` and six made-up GPU runs (plus a made-up ncu profile of v4)."""
    from ktui.profiling.ncu import KernelProfile, NcuSummary, write
    from ktui.protocol.events import RunFinished
    from ktui.workspace.kernels import content_hash

    kernel = "softmax_h200"
    source = (ws / "kernels" / "softmax_triton.py").read_text()
    path = ws / "kernels" / f"{kernel}.py"
    state = state_dir(ws)
    store = Store(state / "history.db")
    reference = ws / "references" / "softmax.py"
    for i, (version, verdict, speedup, roofline) in enumerate(SYNTHETIC_GPU):
        text = source + f"\n# version {version}\n"
        digest = content_hash(text.encode())
        assert store.version_for(kernel, digest, str(path)) == version
        started = now - 3600 + i * 300
        run_id = f"synthetic-{version}"
        run_dir = state / "runs" / kernel / str(version)
        run_dir.mkdir(parents=True, exist_ok=True)
        store.record(RunStarted(run_id, kernel=kernel, path=str(path), version=version, content_hash=digest,
                                reference=str(reference), reference_hash=content_hash(reference.read_bytes()),
                                tier="gpu", device="NVIDIA H200", arch="sm_90a", run_dir=str(run_dir), time=started))
        summary = {"correct": [6, 6] if verdict == "passed" else [5, 6]}
        if speedup is not None:  # two shapes: the worst at the fraction listed, the other 10 points above it
            shapes = {"rows=4096,cols=4096": {"roofline": roofline, "bound": "memory-bound"},
                      "rows=32768,cols=1024": {"roofline": roofline + 0.1, "bound": "memory-bound"}}
            summary.update(speedup=speedup, roofline_shapes=shapes, roofline_done=0.9,
                           roofline_worst={"shape": "rows=4096,cols=4096", **shapes["rows=4096,cols=4096"]},
                           satisfied=False, short=["rows=4096,cols=4096"] + (["rows=32768,cols=1024"] if roofline < 0.8 else []))
        store.record(RunFinished(run_id, verdict=verdict, summary=summary, duration_s=6.0, time=started + 6.0))
        path.write_text(text)  # the last version is what is on disk
    store.close()
    profile = KernelProfile(name="softmax_kernel", launches=1, duration_us=41.7, dram_pct=83.0, sm_pct=21.5,
                            occupancy_pct=46.0, registers=28, shared_bytes=0, l2_hit_pct=12.0,
                            stalls=[("long_scoreboard", 61.0), ("wait", 12.0), ("barrier", 9.0)],
                            findings=[{"rule": "SOLBottleneck", "message": "Memory is more heavily utilized than Compute.",
                                       "est_speedup_pct": None, "type": "OPT"}])
    write(state / "runs" / kernel / "4", NcuSummary(
        kernel=kernel, version=4, content_hash=content_hash((source + "\n# version 4\n").encode()),
        shape={"rows": 4096, "cols": 4096}, set="basic", device="NVIDIA H200", created=now - 1500,
        report_path=str(state / "runs" / kernel / "4" / "profile.ncu-rep"), kernels=[profile],
        total_duration_us=41.7))
    return kernel
