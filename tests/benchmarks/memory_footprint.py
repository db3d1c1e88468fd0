"""Peak device memory of a checked run against the problem's own footprint, at KernelBench sizes.

Three problems in KernelBench's format, written here (not copied) at the sizes of level 1's
largest: a softmax over 4096×393216 fp32, a ReLU of the same size, and an RMSNorm over dim 1 of
112×64×512×512 fp32 — 6.4 to 7.5 GB per tensor. Each gets an honest Triton ``ModelNew``. Each pair
runs through the real CLI (``ktui run CANDIDATE --reference PROBLEM --json --no-bench``, or with the
benchmark on with ``--bench``) and the
table reads ``footprint_gb`` (inputs + reference output + candidate output), ``peak_mem_gb`` (the
allocator's high-water mark over the run) and ``mem_ratio`` from the run's summary.

    python tests/benchmarks/memory_footprint.py                  # on a GPU, the real sizes
    python tests/benchmarks/memory_footprint.py --only softmax   # one problem
    python tests/benchmarks/memory_footprint.py --bench          # the benchmark on too (its input sets)
    python tests/benchmarks/memory_footprint.py --scale 0.001    # every dim × 0.001^(1/ndim): a CPU smoke run

Target: ``mem_ratio`` <= 3 for every problem. On the CPU tier there is no peak figure (no device
allocator to read) and the table says so instead of showing one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBLEMS: dict[str, dict] = {
    "softmax": {
        "shape": (4096, 393216),
        "problem": '''
            """Softmax over dim 1 (KernelBench level 1's size)."""
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    return torch.softmax(x, dim=1)


            batch_size, dim = {shape}


            def get_inputs():
                return [torch.rand(batch_size, dim)]


            def get_init_inputs():
                return []
        ''',
        "candidate": '''
            """Softmax over dim 1, one program per row: an online max/sum pass, then a writing pass.
            Reads the row twice and writes it once (12 bytes per element in fp32)."""
            import torch
            import torch.nn as nn
            import triton
            import triton.language as tl


            @triton.jit
            def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
                base = tl.program_id(0).to(tl.int64) * cols
                m = tl.full([BLOCK], -float("inf"), tl.float32)
                s = tl.zeros([BLOCK], tl.float32)
                for start in range(0, cols, BLOCK):
                    offs = start + tl.arange(0, BLOCK)
                    x = tl.load(x_ptr + base + offs, mask=offs < cols, other=-float("inf"))
                    m_new = tl.maximum(m, x)
                    seen = m_new > -float("inf")  # lanes that have held a value (else exp(-inf + inf) is NaN)
                    s = tl.where(seen, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
                    m = m_new
                row_max = tl.max(m, axis=0)
                total = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), axis=0)
                for start in range(0, cols, BLOCK):
                    offs = start + tl.arange(0, BLOCK)
                    x = tl.load(x_ptr + base + offs, mask=offs < cols, other=0.0)
                    tl.store(y_ptr + base + offs, tl.exp(x - row_max) / total, mask=offs < cols)


            class ModelNew(nn.Module):
                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    x = x.contiguous()
                    y = torch.empty_like(x)
                    block = min(4096, triton.next_power_of_2(x.shape[1]))
                    softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=block)
                    return y
        ''',
    },
    "relu": {
        "shape": (4096, 393216),
        "problem": '''
            """ReLU, elementwise (KernelBench level 1's size)."""
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    return torch.relu(x)


            batch_size, dim = {shape}


            def get_inputs():
                return [torch.randn(batch_size, dim)]


            def get_init_inputs():
                return []
        ''',
        "candidate": '''
            """ReLU, one block of elements per program: 8 bytes per element in fp32."""
            import torch
            import torch.nn as nn
            import triton
            import triton.language as tl


            @triton.jit
            def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
                x = tl.load(x_ptr + offs, mask=offs < n)
                tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


            class ModelNew(nn.Module):
                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    x = x.contiguous()
                    y = torch.empty_like(x)
                    n = x.numel()
                    relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096)
                    return y
        ''',
    },
    "rmsnorm": {
        "shape": (112, 64, 512, 512),
        "problem": '''
            """RMS normalisation over dim 1 of (batch, features, d1, d2) (KernelBench level 1's size)."""
            import torch
            import torch.nn as nn


            class Model(nn.Module):
                def __init__(self, num_features: int, eps: float = 1e-5):
                    super().__init__()
                    self.num_features, self.eps = num_features, eps

                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
                    return x / rms


            batch_size, features, dim1, dim2 = {shape}


            def get_inputs():
                return [torch.randn(batch_size, features, dim1, dim2)]


            def get_init_inputs():
                return [features]
        ''',
        "candidate": '''
            """RMS normalisation over dim 1: a program per (batch, block of d1·d2 positions) sums the
            squares over the features, then writes x / rms. Reads x twice, writes once."""
            import torch
            import torch.nn as nn
            import triton
            import triton.language as tl


            @triton.jit
            def rmsnorm_kernel(x_ptr, y_ptr, features, spatial, eps, BLOCK: tl.constexpr):
                batch = tl.program_id(1).to(tl.int64)
                offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
                mask = offs < spatial
                base = batch * features * spatial + offs
                squares = tl.zeros([BLOCK], tl.float32)
                for f in range(0, features):
                    x = tl.load(x_ptr + base + f * spatial, mask=mask, other=0.0)
                    squares += x * x
                rms = tl.sqrt(squares / features + eps)
                for f in range(0, features):
                    x = tl.load(x_ptr + base + f * spatial, mask=mask, other=0.0)
                    tl.store(y_ptr + base + f * spatial, x / rms, mask=mask)


            class ModelNew(nn.Module):
                def __init__(self, num_features: int, eps: float = 1e-5):
                    super().__init__()
                    self.num_features, self.eps = num_features, eps

                def forward(self, x: torch.Tensor) -> torch.Tensor:
                    x = x.contiguous()
                    y = torch.empty_like(x)
                    batch, features = x.shape[0], x.shape[1]
                    spatial = x.numel() // (batch * features)
                    grid = (triton.cdiv(spatial, 1024), batch)
                    rmsnorm_kernel[grid](x, y, features, spatial, self.eps, BLOCK=1024)
                    return y
        ''',
    },
}

RUNGS_WITH_LIMITS = ("pre-checks", "compile", "run", "correctness", "integrity")


def scaled(shape: tuple[int, ...], scale: float) -> tuple[int, ...]:
    """Every dim × scale^(1/ndim) (at least 1): about ``scale`` times the elements, same rank."""
    factor = scale ** (1 / len(shape))
    return tuple(max(1, round(d * factor)) for d in shape)


def write_pair(root: Path, name: str, shape: tuple[int, ...]) -> tuple[Path, Path]:
    spec = PROBLEMS[name]
    problem = root / f"{name}_problem.py"
    candidate = root / f"{name}_triton.py"
    problem.write_text(textwrap.dedent(spec["problem"]).lstrip().replace("{shape}", ", ".join(map(str, shape))))
    candidate.write_text(textwrap.dedent(spec["candidate"]).lstrip())
    return problem, candidate


def run_pair(problem: Path, candidate: Path, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "ktui", "run", str(candidate), "--reference", str(problem), "--json"]
    command += ["--bench-time", f"{args.bench_time:g}"] if args.bench else ["--no-bench"]
    if args.cpu:
        command.append("--cpu")
    for rung in RUNGS_WITH_LIMITS:
        command += ["--timeout", f"{rung}={args.rung_timeout:g}"]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=problem.parent, capture_output=True, text=True, timeout=args.timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - started
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    start = next((e for e in events if e["type"] == "run_started"), {})
    end = next((e for e in events if e["type"] == "run_finished"), None)
    if end is None:
        return {"verdict": f"no result (exit {proc.returncode})", "summary": {}, "wall_s": wall,
                "device": start.get("device", "?"), "tier": start.get("tier", "?"), "error": proc.stderr[-1500:]}
    return {"verdict": end["verdict"], "summary": end.get("summary", {}), "message": end.get("message", ""),
            "wall_s": wall, "device": start.get("device", "?"), "tier": start.get("tier", "?")}


def table(rows: list[dict]) -> str:
    header = ("problem", "shape", "footprint GB", "peak GB", "ratio", "verdict", "wall s")
    lines = []
    for row in rows:
        s = row["summary"]
        footprint = s.get("footprint_gb")
        peak = s.get("peak_mem_gb")
        no_peak = "n/a (CPU tier)" if row["tier"] == "cpu" else "absent"
        lines.append((
            row["name"],
            "×".join(map(str, row["shape"])),
            _gb(footprint) if footprint is not None else "absent",
            _gb(peak) if peak is not None else no_peak,
            f"{s['mem_ratio']:.2f}×" if "mem_ratio" in s else "-",
            row["verdict"],
            f"{row['wall_s']:.1f}",
        ))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)), *(fmt.format(*line) for line in lines)])


def _gb(value: float) -> str:
    return f"{value:.2f}" if value >= 1 else f"{value:.3g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="about this fraction of the elements (CPU smoke: 0.001)")
    parser.add_argument("--only", action="append", choices=sorted(PROBLEMS), help="run only these problems")
    parser.add_argument("--cpu", action="store_true", help="the CPU tier even where a GPU exists")
    parser.add_argument("--rung-timeout", type=float, default=600.0, metavar="S", help="per-rung limit (default 600)")
    parser.add_argument("--timeout", type=float, default=1800.0, metavar="S", help="per-problem limit (default 1800)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="also write the rows as JSON")
    parser.add_argument("--bench", action="store_true", help="with the benchmark on (default: --no-bench)")
    parser.add_argument("--bench-time", type=float, default=1.0, metavar="S", help="with --bench: ktui's --bench-time")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="ktui-memory-") as tmp:
        for name in args.only or list(PROBLEMS):
            shape = scaled(PROBLEMS[name]["shape"], args.scale) if args.scale != 1.0 else PROBLEMS[name]["shape"]
            problem, candidate = write_pair(Path(tmp), name, shape)
            print(f"{name} {'×'.join(map(str, shape))} ({math.prod(shape) * 4 / 1e9:.3g} GB per tensor) ...", flush=True)
            rows.append({"name": name, "shape": list(shape), **run_pair(problem, candidate, args)})

    devices = sorted({r["device"] for r in rows})
    mode = f"benchmark on (--bench-time {args.bench_time:g})" if args.bench else "--no-bench"
    print(f"\ndevice: {', '.join(devices)} · {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC · scale {args.scale:g} · {mode}")
    print(table(rows))
    if any(r["tier"] == "cpu" for r in rows):
        print("CPU tier: no device allocator, so no peak figure (the footprint is still the problem's own).")
    for row in rows:
        s = row["summary"]
        if row["verdict"] != "passed":
            failure = s.get("first_failure") or {}
            print(f"{row['name']}: {failure.get('rung', '')} {failure.get('message') or row.get('message') or row.get('error', '')}")
        if isinstance(s.get("mem_ratio"), (int, float)) and s["mem_ratio"] > 3:
            print(f"{row['name']}: peak is {s['mem_ratio']:.2f}× the footprint (target <= 3×)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if all(r["verdict"] == "passed" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
