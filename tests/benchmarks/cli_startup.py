"""How long the parent's commands take, start-up included: ``ktui --help`` and ``ktui history``.

Each is run N times as a whole process (``python -m ktui …``, this checkout's ktui first on the
path), after one warm-up run that is not counted; the median is the figure, min and max show the
spread (a wide one says the machine was busy). ``ktui history`` reads a throwaway workspace's
empty history: what is timed is the CLI, not the query. The device, the date and the commit head
the output, so figures from two machines or two commits can be set side by side.
Targets: ``ktui --help`` ≤ 0.3 s on the H200's host, ≤ 0.5 s on the CPU tier.

    python3 tests/benchmarks/cli_startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def device() -> str:
    """The GPU's name where nvidia-smi answers, else the CPU's, with the core count."""
    if shutil.which("nvidia-smi"):
        found = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True).stdout.strip().splitlines()
        if found:
            return f"{found[0]} (host: {os.cpu_count()} cores)"
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU"


def commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    return (head.stdout.strip() or "unknown") + (" (uncommitted changes)" if dirty else "")


def timed(argv: list[str], cwd: Path, env: dict, runs: int) -> list[float]:
    """Wall seconds of each of ``runs`` whole runs of ``argv``, after one warm-up run."""
    seconds = []
    for i in range(runs + 1):
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-2000:]}")
        if i:
            seconds.append(elapsed)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each command (default 20)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    print(f"{device()} · {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · ktui {commit()} · "
          f"Python {platform.python_version()} · {args.runs} runs each, median (min-max)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "kernels").mkdir()
        (root / "kernels" / "k.py").write_text("")
        commands = {
            "python -c pass (the floor)": [sys.executable, "-c", "pass"],
            "ktui --help": [sys.executable, "-m", "ktui", "--help"],
            "ktui history kernels/k.py": [sys.executable, "-m", "ktui", "history", "kernels/k.py"],
        }
        for name, argv in commands.items():
            seconds = timed(argv, root, env, args.runs)
            print(f"  {name:<28} {statistics.median(seconds):6.3f} s  ({min(seconds):.3f}-{max(seconds):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
