"""How much the save → verdict chain's two single-threaded steps slow down beside busy processes.

The chain ends in the worker's compile of the traced shape, then an nvdisasm of its CUBIN; a GPU
session's compile-ahead helpers compile the other shapes at the same time, niced. This times both
steps alone and beside N busy processes of two kinds: ``spin`` (a niced Python loop: CPU time
only) and ``compile`` (a niced Triton compile of the shipped softmax in a loop, as a helper does;
GPU machines only), so a slowdown can be told apart from the scheduler's share of CPU time.

    python tests/benchmarks/tool_contention.py [--busy spin:0,spin:4,compile:4] [--reps 5] [--json OUT.json]

Prints the machine's CPU (model, cores, threads per core) and per configuration the p50 / min /
max seconds of one ``nvdisasm -c -ndf -g`` of an H200 CUBIN (tests/fixtures/hotspots/h200) and,
on a GPU, of one Triton compile of the shipped softmax past Triton's cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CUBIN = REPO / "tests" / "fixtures" / "hotspots" / "h200" / "gemm_bf16_triton.cubin"
NICENESS = 10  # the helpers' (ktui.worker.ahead.helper.NICENESS)

SPIN = f"import os\nos.nice({NICENESS})\nwhile True:\n    pass\n"
COMPILE = f"""import os, sys
os.nice({NICENESS})
sys.path.insert(0, {str(Path(__file__).parent)!r})
from tool_contention import compile_softmax
while True:
    compile_softmax()
"""


def compile_softmax() -> float:
    """Seconds of one compile of the shipped softmax's kernel, made new as a save makes it: a fresh
    comment inside the ``@triton.jit`` function misses Triton's caches, in memory and on disk."""
    import importlib.util
    import tempfile

    import torch

    source = (REPO / "kernels" / "softmax_triton.py").read_text()
    mark = "    row = tl.program_id(0)\n"
    assert mark in source, "the shipped softmax changed: update the mark"
    folder = Path(tempfile.mkdtemp(prefix="ktui-contention-"))
    path = folder / f"softmax_{time.time_ns()}.py"
    path.write_text(source.replace(mark, mark + f"    # contention probe {time.time_ns()}\n"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.empty((4, 1024), device="cuda")
    started = time.perf_counter()
    compiled = module.softmax_kernel.warmup(x, x, x.stride(0), x.stride(0), 1024, BLOCK=1024, grid=(4,))
    seconds = time.perf_counter() - started
    assert compiled.asm.get("cubin"), "the warm-up compiled nothing"
    path.unlink()
    folder.rmdir()
    return seconds


def nvdisasm_once() -> float:
    sys.path.insert(0, str(REPO))
    from ktui.measure import sass

    started = time.perf_counter()
    sass.disassemble(CUBIN, line_info=True)
    return time.perf_counter() - started


def cpu_line() -> str:
    fields = {}
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return (f"{fields.get('Model name', '?')} · {os.cpu_count()} CPUs · {fields.get('Thread(s) per core', '?')} "
            f"thread(s) per core · {fields.get('Socket(s)', '?')} socket(s)")


def measure(kind: str, count: int, reps: int, gpu: bool) -> dict:
    code = SPIN if kind == "spin" else COMPILE
    busy = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL) for _ in range(count)]
    try:
        time.sleep(8.0 if kind == "compile" and count else 0.5)  # a compile loop imports torch first
        result = {"nvdisasm_s": _stats([nvdisasm_once() for _ in range(reps)])}
        if gpu:
            result["compile_s"] = _stats([compile_softmax() for _ in range(reps)])
        result["busy_alive"] = sum(p.poll() is None for p in busy)
        return result
    finally:
        for p in busy:
            p.kill()
            p.wait()


def _stats(samples: list[float]) -> dict:
    return {"p50": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", default="spin:0,spin:4,spin:12,compile:4", help="KIND:N,… (spin or compile)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu:
        compile_softmax()  # Triton's one-time set-up, outside every figure
    nvdisasm_once()
    rows = {}
    print(f"tool contention · {cpu_line()} · {time.strftime('%Y-%m-%d')}")
    for item in args.busy.split(","):
        kind, _, count = item.partition(":")
        if kind == "compile" and not gpu:
            print(f"  {item}: skipped (needs a GPU)")
            continue
        rows[item] = row = measure(kind, int(count), args.reps, gpu)
        text = f"  {kind} × {count} ({row['busy_alive']} alive): nvdisasm p50 {row['nvdisasm_s']['p50']:.3f} s " \
               f"({row['nvdisasm_s']['min']:.3f}–{row['nvdisasm_s']['max']:.3f})"
        if "compile_s" in row:
            text += f"; compile p50 {row['compile_s']['p50']:.3f} s ({row['compile_s']['min']:.3f}–{row['compile_s']['max']:.3f})"
        print(text, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu_line(), "date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
