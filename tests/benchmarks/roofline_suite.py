"""The kernel suite at the roofline: ``ktui calibrate``, then ``ktui run --json`` on a kernels
folder, printed as one markdown table (or ``--json``).

    python tests/benchmarks/roofline_suite.py kernels            # on a GPU machine, ~4-5 min on an H200
    python tests/benchmarks/roofline_suite.py kernels --json --bench-time 1

Per benchmark shape: kernel, dtype, shape, bytes moved or FLOPs (the reference's model), GB/s or
TFLOP/s, the share of the ceiling the benchmark rung used (calibrated where ``ktui calibrate``
ran), the speedup against the kernel's reference and against torch. The references of ``add``,
``softmax`` and ``rmsnorm`` are not torch's own op in the input dtype (float64, or float32 then
rounded), so a second ``ktui run --reference`` pass judges and times those kernels against a
reference whose ``ref_kernel`` is the torch op (``TORCH_OPS``); ``gemm_bf16``'s reference is
``torch.matmul`` already. A figure the run did not produce is printed as ``not measured``, never
as a number, and the script exits 2 when no benchmark was measured at all.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

# op (the reference's file stem) -> the torch op as a ref_kernel, or None: the reference is torch's op
TORCH_OPS = {
    "add": "def ref_kernel(x, y):\n    return torch.add(x, y)\n",
    "softmax": "def ref_kernel(x):\n    return torch.softmax(x, dim=-1)\n",
    "rmsnorm": ("def ref_kernel(x, weight):\n"
                "    return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, _shipped.EPS)\n"),
    "gemm_bf16": None,
}
CONTRACT = ("TESTS", "BENCHMARKS", "generate_input", "flops", "bytes_moved", "TOLERANCES", "EPS")
NOT_MEASURED = "not measured"


def ktui(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ktui", *args], cwd=cwd, capture_output=True, text=True)


def events_of(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "type" in record:
            out.append(record)
    return out


def benchmarks(events: list[dict]) -> dict[tuple[str, str], dict]:
    """(kernel, shape) -> {"reference", "device", "status", "message", "figures"} per benchmark rung."""
    runs: dict[str, dict] = {}
    found: dict[tuple[str, str], dict] = {}
    for e in events:
        if e["type"] == "run_started":
            runs[e["run_id"]] = e
        elif e["type"] == "rung_finished" and e.get("rung", "").startswith("benchmark["):
            run = runs.get(e["run_id"], {})
            shape = e["rung"][len("benchmark["):-1]
            found[(run.get("kernel", "?"), shape)] = {
                "reference": Path(run.get("reference") or "?").stem, "device": run.get("device", "?"),
                "status": e.get("status"), "message": (e.get("message") or "").splitlines()[0][:120] if e.get("message") else "",
                "figures": e.get("figures") if isinstance(e.get("figures"), dict) else {}}
    return found


def torch_reference(folder: Path, op: str, body: str, into: Path) -> Path:
    """A reference file: the shipped one's shapes and inputs, torch's op as ``ref_kernel``."""
    shipped = (folder / "references" / f"{op}.py").resolve()
    names = "\n".join(f"if hasattr(_shipped, {n!r}):\n    {n} = _shipped.{n}" for n in CONTRACT)
    text = (f'"""{op} judged and timed against torch\'s own op (the roofline suite\'s second pass)."""\n'
            "import importlib.util\n\nimport torch\n\n"
            f"_spec = importlib.util.spec_from_file_location('_shipped_{op}', {str(shipped)!r})\n"
            "_shipped = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_shipped)\n"
            f"{names}\n\n{body}")
    path = into / f"{op}_torch.py"
    path.write_text(text)
    return path


def positive(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value == value and value > 0 else None


def row_of(kernel: str, shape: str, bench: dict, vs_torch: float | None, torch_note: str) -> dict:
    f = bench["figures"]
    us = positive(f.get("kernel_us")) if bench["status"] == "ok" else None
    named = [p.split("=", 1)[1] for p in shape.split(",") if p.startswith("dtype=")]
    row = {"kernel": kernel, "reference": bench["reference"], "shape": shape,
           "dtype": f.get("dtype") or (named[0] if named else "default"),
           "status": bench["status"], "message": bench["message"] if bench["status"] != "ok" else "",
           "kernel_us": us, "bound": f.get("bound"), "ceiling": f.get("ceiling"),
           "gbps": positive(f.get("gbps")) if us else None, "tflops": positive(f.get("tflops")) if us else None,
           "roofline": positive(f.get("roofline")) if us else None,
           "speedup": positive(f.get("speedup")) if us else None, "speedup_ci": f.get("speedup_ci") if us else None,
           "vs_torch": vs_torch if us else None, "vs_torch_note": torch_note}
    row["bytes"] = row["gbps"] * 1e9 * us * 1e-6 if row["gbps"] else None
    row["flops"] = row["tflops"] * 1e12 * us * 1e-6 if row["tflops"] else None
    return row


def _fmt(value: float | None, fmt: str) -> str:
    return NOT_MEASURED if value is None else format(value, fmt)


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"## Roofline suite · {meta['device']} · {meta['date']}", "",
             f"Ceilings: {meta['ceilings']}", "",
             "| kernel | dtype | shape | bytes / FLOPs | GB/s / TFLOP/s | % of attainable | × reference | × torch |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["kernel_us"] is None:
            lines.append(f"| {r['kernel']} | {r['dtype']} | {r['shape']} | {r['status']}: {r['message'] or NOT_MEASURED} "
                         "| — | — | — | — |")
            continue
        compute = r["bound"] == "compute-bound"
        work = f"{r['flops'] / 1e9:.1f} GFLOP" if compute and r["flops"] else (
            f"{r['bytes'] / 1e6:.1f} MB" if r["bytes"] else NOT_MEASURED)
        rate = f"{r['tflops']:.0f} TFLOP/s" if compute and r["tflops"] else (
            f"{r['gbps']:.0f} GB/s" if r["gbps"] else NOT_MEASURED)
        share = f"{r['roofline']:.0%} {r['bound']} ({r['ceiling']})" if r["roofline"] else NOT_MEASURED
        ci = r["speedup_ci"]
        speed = _fmt(r["speedup"], ".2f") + ("×" if r["speedup"] else "")
        if r["speedup"] and isinstance(ci, list) and len(ci) == 2:
            speed += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
        torch_x = f"{r['vs_torch']:.2f}×" if r["vs_torch"] else f"{NOT_MEASURED} ({r['vs_torch_note']})"
        lines.append(f"| {r['kernel']} | {r['dtype']} | {r['shape']} | {work} | {rate} | {share} | {speed} | {torch_x} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", type=Path, help="a kernels folder (its parent holds references/)")
    parser.add_argument("--bench-time", type=float, default=2.0, metavar="S", help="ktui run's sampling cap per shape")
    parser.add_argument("--calibrate-time", type=float, default=1.0, metavar="S", help="ktui calibrate --time")
    parser.add_argument("--no-torch-pass", action="store_true", help="skip the second pass against torch's ops")
    parser.add_argument("--skip-calibrate", action="store_true", help="use the calibration already kept")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of markdown")
    args = parser.parse_args(argv)
    folder = args.kernels.resolve()
    root = folder.parent if (folder.parent / "references").is_dir() else folder
    if not folder.is_dir() or not (root / "references").is_dir():
        print(f"roofline_suite: {args.kernels} is not a kernels folder beside a references/ folder", file=sys.stderr)
        return 2
    ceilings = "the calibration already kept for this GPU (the first benchmark measures one where there is none)"
    if not args.skip_calibrate:
        cal = ktui("calibrate", "--json", "--time", str(args.calibrate_time), str(root), cwd=root)
        if cal.returncode != 0:
            print(f"roofline_suite: ktui calibrate failed: {cal.stderr.strip()[-500:]}", file=sys.stderr)
            return 2
        c = json.loads(cal.stdout.strip().splitlines()[-1])
        d = c.get("details", {})
        ceilings = (f"calibrated {c['date']}: memory {c['bandwidth_gbs']:.0f} GB/s "
                    f"({d.get('bandwidth', {}).get('title', '1:1 copy')}, "
                    f"{d.get('bandwidth', d.get('copy', {})).get('kernel', '?')}; "
                    f"Triton copy {_fmt(d.get('copy_triton_gbs'), '.0f')}, torch copy_ {_fmt(d.get('copy_torch_gbs'), '.0f')} GB/s)"
                    f", bf16 matmul {_fmt(c.get('tflops', {}).get('bf16'), '.0f')} TFLOP/s")
    bench = ["--bench-time", str(args.bench_time)]
    first = ktui("run", "--json", *bench, str(folder), cwd=root)
    found = benchmarks(events_of(first.stdout))
    if not found:
        print(f"roofline_suite: ktui run produced no benchmark rung (exit {first.returncode}): "
              f"{first.stderr.strip()[-500:]}", file=sys.stderr)
        return 2
    torch_found: dict[tuple[str, str], dict] = {}
    if not args.no_torch_pass:
        by_op: dict[str, set[str]] = {}
        for (kernel, _), b in found.items():
            if TORCH_OPS.get(b["reference"]):
                by_op.setdefault(b["reference"], set()).add(kernel)
        with tempfile.TemporaryDirectory(prefix="ktui-roofline-") as tmp:
            for op, kernels in sorted(by_op.items()):
                ref = torch_reference(root, op, TORCH_OPS[op], Path(tmp))
                paths = [str(folder / f"{k}.py") for k in sorted(kernels)]
                torch_found.update(benchmarks(events_of(ktui("run", "--json", *bench, "--reference", str(ref), *paths,
                                                             cwd=root).stdout)))
    rows = []
    for (kernel, shape), b in found.items():
        op = b["reference"]
        if op in TORCH_OPS and TORCH_OPS[op] is None:
            vs, note = positive(b["figures"].get("speedup")), "the reference is torch's op"
        elif args.no_torch_pass:
            vs, note = None, "--no-torch-pass"
        elif op not in TORCH_OPS:
            vs, note = None, f"no torch op known for {op}"
        else:
            t = torch_found.get((kernel, shape))
            ok = t is not None and t["status"] == "ok"
            vs = positive(t["figures"].get("speedup")) if ok else None
            note = "" if vs else (f"torch pass: {t['status']} {t['message']}" if t else "torch pass did not run it")
        rows.append(row_of(kernel, shape, b, vs, note))
    device = next(iter(found.values()))["device"]
    meta = {"device": device, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "ceilings": ceilings}
    print(json.dumps({**meta, "rows": rows}, indent=1) if args.json else markdown(rows, meta))
    return 0 if any(r["kernel_us"] for r in rows) else 2


if __name__ == "__main__":
    raise SystemExit(main())
