"""One compile of one specialisation of the shipped softmax, per DSL, as the worker makes it: the
floor of a save → verdict, since an edit of a kernel's body changes every specialisation.

* TileLang: the specialisation of the first benchmark shape (4096 columns, float32), with the
  kernel's body made new for each repetition (its exponent shifted by a fresh number, as
  ``watch_latency.py`` edits it), so each compile is lowered and reaches nvcc. Split into tracing
  (``get_tir``), lowering (the rest of TileLang's compile) and nvcc (ktui's nvcc step,
  ``ktui.worker.dsl.tilelang_nvcc``, with the build cache off: one nvcc run, which keeps its PTX).
* CuTeDSL: ``cute.compile`` of the same specialisation (4096 columns, float32, 128-bit vectors),
  which keeps no cache; split into tracing and CuTeDSL's backend (lowering, ptxas).

    python tests/benchmarks/compile_one.py [--reps 5] [--arch sm_90a] [--json OUT.json]

Needs no GPU. Prints p50 / min / max seconds of each part, and the first compile of the process
apart (it pays one-time costs).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SHIFTED = "T.exp2((x[i, j] - top[i]) * LOG2E)"


def load(path: Path, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tilelang_compiles(reps: int, arch: str) -> list[dict]:
    from ktui.worker.dsl import tilelang_kernels, tilelang_nvcc

    os.environ[tilelang_nvcc.NO_CACHE_ENV] = "1"
    tilelang_kernels.configure_env(arch)
    import tilelang  # noqa: F401 (after configure_env)

    tilelang_nvcc.install()
    source = (REPO / "kernels" / "softmax_tilelang.py").read_text()
    assert SHIFTED in source, "the shipped TileLang softmax changed: update SHIFTED"
    folder = Path(tempfile.mkdtemp(prefix="ktui-compile-one-"))
    fresh = random.random()
    out = []
    for rep in range(reps + 1):
        text = source.replace(SHIFTED, f"T.exp2((x[i, j] - top[i]) * LOG2E + {(rep + 1 + fresh) / 1024!r})")
        module = load(folder / f"softmax_tilelang_{rep}.py", text)
        block, threads = module.launch_shape(4096)
        builds = []
        with tilelang_nvcc.listening(builds.append):
            started = time.perf_counter()
            module.softmax_rows.get_tir(4096, block, threads, "float32")
            traced = time.perf_counter()
            module.softmax_rows.compile(4096, block, threads, "float32")  # traces again, lowers, nvcc
            done = time.perf_counter()
        (build,) = builds
        out.append({"trace": traced - started, "lower": done - traced - (traced - started) - build.nvcc_s,
                    "nvcc": build.nvcc_s, "total": done - traced})
    return out


def cutedsl_compiles(reps: int, arch: str) -> list[dict]:
    from ktui.worker.dsl import cutedsl

    cutedsl.configure_env(arch)
    import torch
    from cutlass.base_dsl.compile_backend import CompilerBackend

    module = load(Path(tempfile.mkdtemp(prefix="ktui-compile-one-")) / "softmax_cutedsl_one.py",
                  (REPO / "kernels" / "softmax_cutedsl.py").read_text())
    backend = []
    original = CompilerBackend.compile

    def timed(self, ctx):
        started = time.perf_counter()
        try:
            return original(self, ctx)
        finally:
            backend.append(time.perf_counter() - started)

    CompilerBackend.compile = timed
    out = []
    layout = module.specialisation(4096, 4)
    for _ in range(reps + 1):
        module._compiled.clear()  # its own cache of compiled launchers: each repetition compiles
        backend.clear()
        started = time.perf_counter()
        module._compile(torch.float32, 4, layout)
        total = time.perf_counter() - started
        out.append({"trace": total - sum(backend), "backend": sum(backend), "total": total})
    return out


def stats(samples: list[float]) -> dict:
    return {"p50": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    result = {"date": time.strftime("%Y-%m-%d"), "arch": args.arch, "cpus": os.cpu_count(),
              "load_1min": os.getloadavg()[0]}
    for dsl, compiles in (("tilelang", tilelang_compiles), ("cutedsl", cutedsl_compiles)):
        runs = compiles(args.reps, args.arch)
        result[dsl] = {"first": runs[0], **{part: stats([r[part] for r in runs[1:]]) for part in runs[0]}}
    print(f"one compile of one softmax specialisation (4096 columns, float32) for {args.arch} · "
          f"{result['cpus']} CPUs, load {result['load_1min']:.2f} · {args.reps} repetitions after the first")
    for dsl in ("tilelang", "cutedsl"):
        first = ", ".join(f"{k} {v:.3f}" for k, v in result[dsl]["first"].items())
        print(f"  {dsl}: first in the process: {first}")
        for part, s in result[dsl].items():
            if part != "first":
                print(f"    {part:8s} p50 {s['p50']:.3f} s  min {s['min']:.3f}  max {s['max']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
