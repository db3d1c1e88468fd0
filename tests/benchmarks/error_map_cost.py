"""Benchmark: what the error map adds to a failing correctness rung (target ≤ 5% at the largest test shape).

Two measurements, on this machine's tier (the GPU where there is one, else the CPU tier):

1. **In a real run.** Three wrong versions of the shipped Triton softmax, each written into a
   throwaway workspace: every element wrong (the normaliser doubled), the last 3 columns never
   written (the store's mask cut short) and 1-2% of the elements wrong here and there (the
   normaliser off by 1e-3, tests/fixtures/kernels/softmax_wrong_norm.py), run with ``ktui run
   --json --no-bench``. Each failing correctness rung reports its phases; the error map's share is
   its ``error map`` phase over the rung's ``duration_s``. A passing rung has no such phase (checked).
2. **The map alone.** At the largest test shape of each shipped reference, in this process, on the
   same device: ``metrics.compare`` and ``errormap.locate`` on an output wrong everywhere (the
   worst case: every element is a mismatch to count), medians of ``--repeat`` calls.

Prints both; exits 1 when the map's share of the largest shape's rung exceeds ``--limit`` in any
version.

    python3 tests/benchmarks/error_map_cost.py [--repeat 5] [--limit 0.05] [--cpu]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from conftest import make_workspace  # noqa: E402

SOFTMAX = (REPO / "kernels" / "softmax_triton.py").read_text()
STORE = "tl.store(out_ptr + row * out_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)"
NORMALISE = "out = num / tl.sum(num, axis=0)"
VERSIONS = {
    "softmax_everywhere": SOFTMAX.replace(NORMALISE, "out = 2.0 * num / tl.sum(num, axis=0)"),
    "softmax_tail": SOFTMAX.replace(STORE, STORE.replace("mask=mask)", "mask=mask & (cols < n_cols - 3))")),
    "softmax_scattered": (REPO / "tests" / "fixtures" / "kernels" / "softmax_wrong_norm.py").read_text(),
}


def run_versions(work: Path, cpu: bool) -> list[dict]:
    root = make_workspace(work / "ws")
    for name, text in VERSIONS.items():
        assert text != SOFTMAX, f"{name}: the shipped softmax changed, its planted bug no longer applies"
        (root / "kernels" / f"{name}.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    flags = ["--cpu"] if cpu else []
    proc = subprocess.run([sys.executable, "-m", "ktui", "run", "--json", "--no-bench", "--no-audit", "--seed", "0",
                           "--no-fresh-shapes", *flags, "kernels/"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=1800)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    kernel_of = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    rows = []
    for e in events:
        if e["type"] != "rung_finished" or not e["rung"].startswith("correctness["):
            continue
        spent = e.get("phases_s") or {}
        if e["status"] == "ok" and "error map" in spent:
            raise SystemExit(f"{e['rung']} passed and still paid for an error map: {spent}")
        if e["status"] == "ok":
            continue
        rows.append({"kernel": kernel_of[e["run_id"]], "rung": e["rung"], "duration_s": e["duration_s"],
                     "map_s": spent.get("error map", 0.0), "phases": spent,
                     "where": (e["figures"].get("error_map") or {}).get("description", "")})
    if not rows:
        raise SystemExit(f"no failing correctness rung:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return rows


def map_alone(repeat: int, device: str) -> list[dict]:
    import torch

    from ktui.worker.errormap import locate
    from ktui.worker.metrics import compare

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def median_s(call) -> float:
        times = []
        for _ in range(repeat):
            sync()
            started = time.perf_counter()
            call()
            sync()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    out = []
    for ref_path in sorted((REPO / "references").glob("*.py")):
        spec = importlib.util.spec_from_file_location(ref_path.stem, ref_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        shape = max(module.TESTS, key=lambda s: _elements(s))
        inputs = module.generate_input(0, **shape)
        inputs = tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in inputs)
        ref = module.ref_kernel(*inputs)
        wrong = (ref.double() * 1.5 + 1.0).to(ref.dtype)  # every element a mismatch
        compared = compare(wrong, ref)  # the judgement hands the map the reference's peak it found
        compare_s = median_s(lambda wrong=wrong, ref=ref: compare(wrong, ref))
        map_s = median_s(lambda wrong=wrong, ref=ref, peak=compared.peak: locate(wrong, ref, peak=peak))
        out.append({"reference": ref_path.stem, "shape": shape, "elements": ref.numel(), "dtype": str(ref.dtype),
                    "compare_ms": compare_s * 1e3, "map_ms": map_s * 1e3})
    return out


def _elements(shape: dict) -> int:
    total = 1
    for value in shape.values():
        if isinstance(value, int) and not isinstance(value, bool):
            total *= value
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--limit", type=float, default=0.05, help="the map's largest share of the largest shape's rung")
    ap.add_argument("--cpu", action="store_true", help="the CPU tier even where a GPU exists")
    args = ap.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'CPU'} · torch {torch.__version__} · "
          f"{torch.get_num_threads()} torch threads (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}) · "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_versions(Path(tmp), cpu=device == "cpu")
    print("\n1. failing correctness rungs of `ktui run --json` (the error map's share of each rung)")
    print(f"{'kernel':<20} {'rung':<46} {'rung s':>7} {'metrics s':>9} {'map s':>7} {'share':>7}  where")
    for r in rows:
        share = r["map_s"] / r["duration_s"] if r["duration_s"] else 0.0
        print(f"{r['kernel']:<20} {r['rung']:<46} {r['duration_s']:7.3f} {r['phases'].get('metrics', 0.0):9.3f} "
              f"{r['map_s']:7.3f} {share:7.2%}  {r['where'][:60]}")
    largest = max(rows, key=lambda r: _elements(_shape_of(r["rung"])))["rung"]
    worst = max((r["map_s"] / r["duration_s"] for r in rows if r["rung"] == largest and r["duration_s"]), default=0.0)
    print(f"\nlargest test shape {largest}: the map's share at most {worst:.2%} (limit {args.limit:.0%})")
    print("\n2. the map alone against the comparison, an output wrong everywhere, median of", args.repeat)
    print(f"{'reference':<12} {'shape':<34} {'elements':>10} {'compare ms':>11} {'map ms':>9} {'map/compare':>12}")
    for r in map_alone(args.repeat, device):
        print(f"{r['reference']:<12} {json.dumps(r['shape']):<34} {r['elements']:>10} {r['compare_ms']:11.2f} "
              f"{r['map_ms']:9.2f} {r['map_ms'] / r['compare_ms']:12.2f}")
    return 0 if worst <= args.limit else 1


def _shape_of(rung: str) -> dict:
    inner = rung[rung.index("[") + 1: rung.rindex("]")]
    shape = {}
    for part in inner.split(","):
        key, _, value = part.partition("=")
        shape[key] = int(value) if value.isdigit() else value
    return shape


if __name__ == "__main__":
    sys.exit(main())
