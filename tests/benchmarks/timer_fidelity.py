"""Is ktui's timer right? Its median against Nsight Compute and triton's do_bench, and its spread.

For the shipped kernels at sizes from ~5 µs to a few ms, on the local GPU:

- **ktui**: the benchmark rung's own timer (``ktui.worker.timing.sampler.Sampler`` with the default
  settings: read flush of 2 × L2, three rotating input sets, spin pad, warm-up by time, stop at
  0.5% relative standard error or 3 s), in ``--repeats`` separate processes (default 5);
- **spread**: ``max/min - 1`` of those per-process medians (run-to-run, not within-run);
- **ncu**: Nsight Compute's ``gpu__time_duration.sum`` with ``--clock-control none`` (boost clocks,
  as ktui sees them) and its default cache control (caches flushed before each profiled launch),
  median of a few profiled launches after warm-up, one ncu process per case;
- **do_bench**: ``triton.testing.do_bench(..., return_mode="median")`` in the same processes.

Targets (issue 5): ktui within 5% of ncu for kernels >= 50 µs; spread <= 1% for kernels >= 50 µs
and <= 3% for kernels >= 5 µs. Prints a table with device, driver and date, and writes JSON to
``$OUT/timer_fidelity.json`` when ``OUT`` is set (or to ``--json PATH``). Every part runs in its own
process with its own timeout: one that fails or hangs costs its cells, not the table.

    python tests/benchmarks/timer_fidelity.py                 # everything, ~5 minutes on an H200
    python tests/benchmarks/timer_fidelity.py --repeats 2 --no-ncu --cases add_triton   # a quick look
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import importlib.util
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

NCU_WARMUP = 2  # launches skipped before profiling
NCU_COUNT = 5  # launches profiled per case
TARGET_NCU = 0.05
TARGET_SPREAD_LONG = 0.01  # >= 50 µs
TARGET_SPREAD_SHORT = 0.03  # >= 5 µs


@dataclass(frozen=True)
class Case:
    kernel: str  # kernels/<kernel>.py
    ncu_name: str  # regex for ncu --kernel-name
    shape: tuple  # (size,) for add, (rows, cols, dtype) for softmax

    @property
    def id(self) -> str:
        return f"{self.kernel}[{'x'.join(str(s) for s in self.shape)}]"


CASES = [
    Case("add_triton", "add_kernel", (1 << 20,)),
    Case("add_triton", "add_kernel", (1 << 24,)),
    Case("add_triton", "add_kernel", (1 << 26,)),
    Case("add_triton", "add_kernel", (1 << 28,)),
    Case("add_triton", "add_kernel", (1 << 30,)),
    Case("softmax_triton", "softmax_kernel", (1024, 1024, "float32")),
    Case("softmax_triton", "softmax_kernel", (4096, 4096, "float32")),
    Case("softmax_triton", "softmax_kernel", (8192, 8192, "bfloat16")),
    Case("softmax_triton", "softmax_kernel", (16384, 8192, "float32")),
    Case("add_cutedsl", "add_kernel", (1 << 20,)),
    Case("add_cutedsl", "add_kernel", (1 << 24,)),
    Case("add_cutedsl", "add_kernel", (1 << 28,)),
]


# -- inside a child process ----------------------------------------------------------------------
def _load_kernel(name: str):
    spec = importlib.util.spec_from_file_location(f"fidelity_{name}", REPO / "kernels" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def _inputs(case: Case, seed: int):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    if case.kernel.startswith("add"):
        n = case.shape[0]
        return (torch.randn(n, device="cuda", generator=gen), torch.randn(n, device="cuda", generator=gen))
    rows, cols, dtype = case.shape
    x = torch.randn(rows, cols, device="cuda", generator=gen) * 4
    return (x.to(getattr(torch, dtype)),)


def child_measure(cases: list[Case], out: Path) -> None:
    """ktui's timer and do_bench for each case; results appended to ``out`` case by case."""
    import torch
    import triton.testing

    from ktui.measure.stats import StoppingRule, summarize
    from ktui.protocol.job import BenchSettings
    from ktui.worker.timing.clocks import ClockMonitor
    from ktui.worker.timing.sampler import Flush, Sampler

    settings = BenchSettings()
    rule = StoppingRule(settings.rse_target, settings.min_samples, settings.time_s, settings.max_samples)
    sampler = Sampler(Flush(settings.flush), ClockMonitor())
    kernels: dict = {}
    for case in cases:
        result: dict = {"case": case.id}
        sets: list = []
        try:
            fn = kernels.get(case.kernel) or kernels.setdefault(case.kernel, _load_kernel(case.kernel))
            sets = [_inputs(case, seed) for seed in range(settings.input_sets)]
            fn(*sets[0])
            torch.cuda.synchronize()
            m = sampler.measure([lambda i, fn=fn, sets=sets: fn(*sets[i % len(sets)])], rule, settings.warmup_s)
            s = summarize(m.calls[0].samples_ms)
            result.update(ktui_us=s.median * 1e3, ktui_rse=s.rse_median, ktui_n=s.n, ktui_stop=m.stop,
                          ktui_min_us=s.min * 1e3, exposed=m.calls[0].exposed_fraction, flush=m.flush,
                          **m.clocks.figures())
        except Exception as exc:
            result["ktui_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        try:
            fn = kernels[case.kernel]
            result["do_bench_us"] = triton.testing.do_bench(lambda fn=fn, sets=sets: fn(*sets[0]), return_mode="median") * 1e3
        except Exception as exc:
            result["do_bench_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        with out.open("a") as f:
            f.write(json.dumps(result) + "\n")
        del sets
        torch.cuda.empty_cache()


def child_ncu(case: Case) -> None:
    """Run the case's kernel NCU_WARMUP + NCU_COUNT times; ncu profiles the last NCU_COUNT."""
    import torch

    fn = _load_kernel(case.kernel)
    inputs = _inputs(case, 0)
    for _ in range(NCU_WARMUP + NCU_COUNT):
        fn(*inputs)
        torch.cuda.synchronize()


# -- in the parent ---------------------------------------------------------------------------------
@dataclass
class Row:
    case: str
    ktui_us: list[float] = field(default_factory=list)  # per invocation
    ktui_detail: list[dict] = field(default_factory=list)
    do_bench_us: list[float] = field(default_factory=list)
    ncu_us: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ktui(self) -> float | None:
        return statistics.median(self.ktui_us) if self.ktui_us else None

    @property
    def spread(self) -> float | None:
        return max(self.ktui_us) / min(self.ktui_us) - 1 if len(self.ktui_us) >= 2 else None

    @property
    def ncu(self) -> float | None:
        return statistics.median(self.ncu_us) if self.ncu_us else None

    @property
    def do_bench(self) -> float | None:
        return statistics.median(self.do_bench_us) if self.do_bench_us else None

    def verdicts(self) -> dict[str, bool | None]:
        size = self.ncu or self.ktui
        out: dict[str, bool | None] = {"ncu": None, "spread": None}
        if self.ktui and self.ncu and self.ncu >= 50:
            out["ncu"] = abs(self.ktui / self.ncu - 1) <= TARGET_NCU
        if self.spread is not None and size is not None and size >= 5:
            out["spread"] = self.spread <= (TARGET_SPREAD_LONG if size >= 50 else TARGET_SPREAD_SHORT)
        return out


def run_measure(cases: list[Case], rows: dict[str, Row], timeout: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.jsonl"
        cmd = [sys.executable, __file__, "--child-measure", "--cases", ",".join(c.id for c in cases), "--out", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                for row in rows.values():
                    row.errors.append(f"measure process exited {proc.returncode}: {tail}")
        except subprocess.TimeoutExpired:
            for row in rows.values():
                row.errors.append(f"measure process timed out after {timeout:.0f} s")
        if not out.exists():
            return
        for line in out.read_text().splitlines():
            result = json.loads(line)
            row = rows[result["case"]]
            if "ktui_us" in result:
                row.ktui_us.append(result["ktui_us"])
                row.ktui_detail.append(result)
            if "do_bench_us" in result:
                row.do_bench_us.append(result["do_bench_us"])
            for key in ("ktui_error", "do_bench_error"):
                if key in result:
                    row.errors.append(f"{key.split('_')[0]}: {result[key]}")


def find_ncu() -> str | None:
    return os.environ.get("NCU") or shutil.which("ncu") or next(
        (str(p) for p in (Path("/usr/local/cuda/bin/ncu"), *Path("/opt/nvidia").glob("nsight-compute*/ncu")) if p.exists()),
        None)


def parse_ncu_csv(text: str) -> list[float]:
    """``gpu__time_duration.sum`` of every profiled launch, in µs, from ``ncu --csv`` output
    (ncu's own ``==PROF==`` lines and the program's prints may be mixed in)."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if header is None:
        return []
    scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
    out = []
    for record in csv.DictReader(io.StringIO("\n".join(lines[header:]))):
        if record.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = record.get("Metric Unit", "nsecond")
        out.append(float(record["Metric Value"].replace(",", "")) * scale.get(unit, float("nan")))
    return out


def run_ncu(ncu: str, case: Case, row: Row, timeout: float) -> None:
    # Units are left to ncu (it scales them per value); parse_ncu_csv converts each one.
    cmd = [ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           "--kernel-name", f"regex:{case.ncu_name}", "--launch-skip", str(NCU_WARMUP), "--launch-count", str(NCU_COUNT),
           sys.executable, __file__, "--child-ncu", case.id]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        row.errors.append(f"ncu: timed out after {timeout:.0f} s")
        return
    times = parse_ncu_csv(proc.stdout)
    if len(times) != NCU_COUNT:
        tail = [line for line in (proc.stdout + proc.stderr).splitlines() if "ERR" in line or "rror" in line][-1:]
        row.errors.append(f"ncu: {len(times)} of {NCU_COUNT} launches profiled (exit {proc.returncode}) {' '.join(tail)}")
    row.ncu_us.extend(times)


def environment() -> dict:
    import torch
    import triton

    from ktui.worker.timing.clocks import driver_version

    driver, source = driver_version()
    return {"device": torch.cuda.get_device_name(), "driver": driver, "driver_source": source,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "torch": torch.__version__,
            "triton": triton.__version__, "python": sys.version.split()[0]}


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "—" if value is None else format(value, spec)


def table(env: dict, rows: list[Row], notes: list[str]) -> str:
    head = (f"Timer fidelity · {env.get('device')} · driver {env.get('driver')} · {env.get('date')} · "
            f"torch {env.get('torch')} · triton {env.get('triton')}")
    cols = f"{'case':<32} {'ktui µs':>10} {'spread':>7} {'ncu µs':>10} {'vs ncu':>7} {'do_bench':>10} {'vs db':>7}  verdict"
    lines = [head, "", cols, "-" * len(cols)]
    for r in rows:
        vs_ncu = r.ktui / r.ncu - 1 if r.ktui and r.ncu else None
        vs_db = r.ktui / r.do_bench - 1 if r.ktui and r.do_bench else None
        v = r.verdicts()
        verdict = " ".join(f"{k}:{'ok' if ok else 'MISS'}" for k, ok in v.items() if ok is not None) or "no target"
        lines.append(f"{r.case:<32} {fmt(r.ktui):>10} {fmt(r.spread, '.2%'):>7} {fmt(r.ncu):>10} {fmt(vs_ncu, '+.1%'):>7} "
                     f"{fmt(r.do_bench):>10} {fmt(vs_db, '+.1%'):>7}  {verdict}")
        for error in r.errors:
            lines.append(f"{'':<32} ! {error}")
    judged = [ok for r in rows for ok in r.verdicts().values() if ok is not None]
    lines += ["", f"targets: |ktui/ncu - 1| <= {TARGET_NCU:.0%} (>= 50 µs); spread <= {TARGET_SPREAD_LONG:.0%} (>= 50 µs), "
                  f"<= {TARGET_SPREAD_SHORT:.0%} (>= 5 µs) · {sum(judged)}/{len(judged)} met"]
    lines += [f"note: {n}" for n in notes]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="separate ktui processes (default 5)")
    parser.add_argument("--cases", default="", help="comma-separated case ids or kernel names (default: all)")
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--budget", type=float, default=330.0, help="seconds for the whole script (default 330)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--child-measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-ncu", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    wanted = [w for w in args.cases.split(",") if w]
    cases = [c for c in CASES if not wanted or c.id in wanted or c.kernel in wanted]
    if args.child_ncu:
        child_ncu(next(c for c in CASES if c.id == args.child_ncu))
        return 0
    if args.child_measure:
        child_measure(cases, args.out)
        return 0
    if not cases:
        print(f"no case matches {args.cases!r}; cases: {', '.join(c.id for c in CASES)}", file=sys.stderr)
        return 2

    started = time.monotonic()

    def left() -> float:
        return args.budget - (time.monotonic() - started)

    notes: list[str] = []
    try:
        env = environment()
    except Exception as exc:
        env, notes = {}, [f"environment unknown: {exc}"]
    rows = {c.id: Row(c.id) for c in cases}
    ncu = None if args.no_ncu else find_ncu()
    if args.no_ncu:
        notes.append("ncu skipped (--no-ncu)")
    elif ncu is None:
        notes.append("ncu not found (set NCU=/path/to/ncu): no Nsight Compute column")
    # The ktui processes get 60% of the budget when ncu runs (ncu replays are slow), else all of it.
    measure_until = started + args.budget * (0.6 if ncu else 1.0)
    for i in range(args.repeats):
        remaining = measure_until - time.monotonic()
        if remaining < 20:
            notes.append(f"time budget: {args.repeats - i} of {args.repeats} ktui invocations not run")
            break
        # a slow first process (cold caches, compiles) may take more than an even share
        run_measure(cases, rows, timeout=min(remaining, 1.5 * remaining / (args.repeats - i)))
    if ncu:
        for j, case in enumerate(cases):
            per_case = left() / (len(cases) - j)
            if per_case < 10:
                notes.append(f"time budget: ncu not run for {len(cases) - j} case(s)")
                break
            run_ncu(ncu, case, rows[case.id], timeout=min(1.5 * per_case, left(), 120))
    text = table(env, list(rows.values()), notes + [f"wall time {time.monotonic() - started:.0f} s"])
    print(text)
    result = {"environment": env, "notes": notes, "targets": {"ncu": TARGET_NCU, "spread_at_least_50us": TARGET_SPREAD_LONG,
              "spread_at_least_5us": TARGET_SPREAD_SHORT},
              "rows": [{**asdict(r), "ktui_median_us": r.ktui, "spread": r.spread, "ncu_median_us": r.ncu,
                        "do_bench_median_us": r.do_bench, "verdicts": r.verdicts()} for r in rows.values()],
              "table": text}
    targets = [Path(os.environ["OUT"]) / "timer_fidelity.json"] if os.environ.get("OUT") else []
    if args.json:
        targets.append(args.json)
    for path in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=2))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
