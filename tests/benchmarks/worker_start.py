"""Where a worker's start goes: the spawn → ready wall time, split by the phases the worker reports.

A cold ``ktui run`` waits for its worker before anything runs; on the H200 a cold run added 7.4 s
to its own 1.65 s (docs/measured/log/2026-12-02.md). This starts ``python -m ktui.worker.main`` N times, as the
parent does, and prints per phase the median seconds: the interpreter and ktui's own imports
before ``main`` (the wall time less the phases), Landlock, torch's import, the DSLs, the rung
modules, CUDA's initialisation, the fake-tensor warm-up and the harness snapshot.

    python3 tests/benchmarks/worker_start.py [--runs 5] [--cpu]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_startup import commit, device  # noqa: E402


def one_start(cpu: bool) -> tuple[float, dict[str, float]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ktui.worker.main", *(["--cpu"] if cpu else [])],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        ready = json.loads(proc.stdout.readline())
        wall = time.perf_counter() - started
    finally:
        proc.kill()
        proc.wait()
    if ready.get("type") != "ready":
        raise SystemExit(f"the worker did not say ready: {ready}")
    return wall, ready.get("start_s") or {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cpu", action="store_true", help="the CPU tier (no CUDA initialisation)")
    args = parser.parse_args()
    starts = [one_start(args.cpu) for _ in range(args.runs)]
    print(f"# worker start · {dt.date.today()} · commit {commit()} · {device()} · {args.runs} starts"
          f"{' · CPU tier' if args.cpu else ''}")
    walls = [wall for wall, _ in starts]
    before = [wall - sum(phases.values()) for wall, phases in starts]
    print(f"{'spawn → ready':<34} p50 {statistics.median(walls):6.3f} s   min {min(walls):6.3f}   max {max(walls):6.3f}")
    print(f"  {'interpreter, imports before main':<32} p50 {statistics.median(before):6.3f} s")
    for name in starts[0][1]:
        values = [phases.get(name, 0.0) for _, phases in starts]
        print(f"  {name:<32} p50 {statistics.median(values):6.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
