"""Kernels per minute: ``ktui run`` one kernel after another against ``ktui run --ray``.

A workspace of N kernels (copies of the shipped add and softmax kernels and of quick fixtures,
correct and wrong, each under its own name so each is its own kernel) is judged three ways:

- ``serial``: ``ktui run --no-bench kernels`` — one warm worker, one kernel at a time;
- ``ray``: ``ktui run --ray --no-bench kernels`` — end to end, starting a local Ray instance;
- ``ray (started)``: the same pool in this process, timed after Ray and its actors are up (what
  an agent that keeps a cluster running sees).

    python tests/benchmarks/ray_throughput.py [--kernels 16] [--cpus N] [--cpu]

Prints wall time and kernels per minute for each, and checks that the verdicts agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "run"))

from conftest import make_workspace  # noqa: E402
from ray_driven import judged  # noqa: E402

from ktui.dispatch.ray.pool import RayPool  # noqa: E402
from ktui.dispatch.runner import WorkerConfig  # noqa: E402
from ktui.protocol.job import Options  # noqa: E402
from ktui.workspace.kernels import discover  # noqa: E402

SOURCES = [REPO / "kernels" / "add_triton.py", REPO / "kernels" / "softmax_triton.py",
           *(REPO / "tests" / "fixtures" / "kernels" / f"{name}.py"
             for name in ("wrong_values", "softmax_twopass", "wrong_shape", "raises"))]


def workspace(n: int) -> Path:
    root = make_workspace(Path(tempfile.mkdtemp(prefix="ktui-ray-bench-")) / "ws")
    for i in range(n):
        source = SOURCES[i % len(SOURCES)]
        shutil.copy(source, root / "kernels" / f"k{i:02d}_{source.stem}.py")
    return root


def cli(root: Path, *flags: str) -> tuple[float, dict[str, str]]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ktui", "run", "--json", "--no-bench", "--seed", "1", "kernels",
                           *flags], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    elapsed = time.monotonic() - started
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    kernel_of = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    verdicts = {kernel_of[e["run_id"]]: e["verdict"] for e in events if e["type"] == "run_finished"}
    if not verdicts:
        sys.exit(f"ktui run {' '.join(flags)} gave no runs:\n{proc.stderr}")
    return elapsed, verdicts


def in_process(root: Path, cpus: int | None, force_cpu: bool) -> tuple[float, dict[str, str]]:
    pool = RayPool(config=WorkerConfig(force_cpu=force_cpu), num_cpus=cpus)
    try:
        started = time.monotonic()
        finished = judged(pool, discover([root / "kernels"]), Options(seed=1, benchmark=False, force_cpu=force_cpu))
        elapsed = time.monotonic() - started
    finally:
        pool.close()
    return elapsed, {run.run_id: run.verdict for run in finished}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=16)
    parser.add_argument("--cpus", type=int, default=None, help="CPUs for the local Ray instance (default: all)")
    parser.add_argument("--cpu", action="store_true", help="the CPU tier even where a GPU exists")
    args = parser.parse_args()
    flags = ["--cpu"] if args.cpu else []
    rows = []
    serial_s, serial = cli(workspace(args.kernels), *flags)
    rows.append(("serial", serial_s))
    ray_s, on_ray = cli(workspace(args.kernels), *flags, "--ray")
    rows.append(("ray", ray_s))
    if on_ray != serial:
        print(f"verdicts differ: serial {serial} ray {on_ray}", file=sys.stderr)
    warm_s, _ = in_process(workspace(args.kernels), args.cpus, args.cpu)
    rows.append(("ray (started)", warm_s))
    print(f"{args.kernels} kernels, {os.cpu_count()} CPUs, verdicts {'agree' if on_ray == serial else 'DIFFER'}")
    for name, seconds in rows:
        print(f"{name:>14}: {seconds:6.1f} s  {args.kernels / seconds * 60:6.1f} kernels/min  "
              f"({serial_s / seconds:.2f}x serial)")


if __name__ == "__main__":
    main()
