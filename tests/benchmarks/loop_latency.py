"""Save-to-verdict latency of the loop: a warm worker against a cold process for every run.

Each repetition edits the softmax kernel's body (a new comment inside the @triton.jit function,
so Triton's cache misses and the kernel really recompiles), then runs the ladder up to the
correctness verdict (no benchmark) and records the wall time from the write to ``run_finished``.
"warm" reuses one worker (torch, Triton and the CUDA context already loaded); "cold" starts a
fresh worker process for every run, as a tool without a warm worker would.

    python tests/benchmarks/loop_latency.py [--reps 10] [--cpu] [--json OUT.json]

Prints the device, the tier and p50/p90 of each mode. The watcher's debounce (about 150 ms in the
dashboard) comes on top of these figures. Target on an H200: warm p50 <= 1.5 s and <= half of cold.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ktui.dispatch.runner import WorkerConfig, WorkerRunner  # noqa: E402
from ktui.dispatch.session import Session  # noqa: E402
from ktui.protocol.events import RunFinished, RunStarted  # noqa: E402
from ktui.protocol.job import Options  # noqa: E402
from ktui.workspace.kernels import kernel_at  # noqa: E402

MARK = "    row = tl.program_id(0)\n"


def make_workspace() -> Path:
    root = Path(tempfile.mkdtemp(prefix="ktui-latency-"))
    (root / "kernels").mkdir()
    (root / "references").mkdir()
    shutil.copy(REPO / "references" / "softmax.py", root / "references" / "softmax.py")
    shutil.copy(REPO / "kernels" / "softmax_triton.py", root / "kernels" / "softmax_triton.py")
    return root


def edit(path: Path, i: int, mode: str) -> None:
    """A change inside the kernel body: a new source hash, so Triton recompiles."""
    text = path.read_text()
    start = text.index(MARK) + len(MARK)
    end = text.index("\n", start) + 1 if text[start:].startswith("    # edit") else start
    path.write_text(text[:start] + f"    # edit {mode} {i} {time.time_ns()}\n" + text[end:])


def measure(mode: str, reps: int, force_cpu: bool) -> tuple[list[float], dict]:
    root = make_workspace()
    runner = WorkerRunner(WorkerConfig(force_cpu=force_cpu), fresh_each_run=(mode == "cold"), prestart=(mode == "warm"))
    session = Session(root, runner=runner)
    path = root / "kernels" / "softmax_triton.py"
    samples, info = [], {}
    try:
        for i in range(reps + 1):  # the first warm run pays for the worker start: dropped
            edit(path, i, mode)
            started = time.perf_counter()
            job = session.prepare(kernel_at(path), Options(benchmark=False, seed=i))
            verdict = None
            for event in session.events(job):
                if isinstance(event, RunStarted):
                    info = {"tier": event.tier, "device": event.device, "arch": event.arch}
                if isinstance(event, RunFinished):
                    verdict = event.verdict
            elapsed = time.perf_counter() - started
            if verdict != "passed":
                raise SystemExit(f"{mode} run {i} ended {verdict}: the latency of a failing run is not the point")
            if i > 0 or mode == "cold":
                samples.append(elapsed)
    finally:
        session.close()
        shutil.rmtree(root, ignore_errors=True)
    return samples[:reps], info


def describe(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "n": len(samples),
        "p50_s": statistics.median(samples),
        "p90_s": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))],
        "min_s": ordered[0],
        "max_s": ordered[-1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--cpu", action="store_true", help="force the CPU tier")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    results = {}
    for mode in ("warm", "cold"):
        samples, info = measure(mode, args.reps, args.cpu)
        results[mode] = {**describe(samples), "samples_s": samples}
        results["device"] = info
    ratio = results["warm"]["p50_s"] / results["cold"]["p50_s"]
    results["warm_over_cold_p50"] = ratio
    dev = results["device"]
    print(f"loop latency, softmax_triton edit → correctness verdict · {dev['device']} · {dev['tier']} · {dev['arch']}")
    print(f"{'mode':<6} {'n':>3} {'p50 s':>8} {'p90 s':>8} {'min s':>8} {'max s':>8}")
    for mode in ("warm", "cold"):
        r = results[mode]
        print(f"{mode:<6} {r['n']:>3} {r['p50_s']:>8.3f} {r['p90_s']:>8.3f} {r['min_s']:>8.3f} {r['max_s']:>8.3f}")
    print(f"warm p50 / cold p50 = {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
