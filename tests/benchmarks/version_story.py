"""A kernel's path to the roofline, version by version, as ktui's history records it.

Each version file is saved in turn as ``kernels/<name>.py`` of a scratch copy of a workspace and
run with ``ktui run --json``, exactly as a developer's saves would be; the table is read back from
the events (and ``ktui history``), never typed in:

    python tests/benchmarks/version_story.py . rmsnorm_triton tests/benchmarks/stories/rmsnorm_triton/*.py \
        kernels/rmsnorm_triton.py

Per version: what changed (the first line of its docstring), the verdict, per benchmark shape the
GB/s or TFLOP/s, the share of the ceiling and the speedup against the reference, the registers and
SASS instructions of its GPU functions (the dumps rung), and the median change against the version
before. The earlier versions live in ``tests/benchmarks/stories/<kernel>/``; the last one is the
shipped file itself (the script says whether it is), so the final version is never kept twice.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roofline_suite import benchmarks, events_of


def what_changed(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else path.stem


def same_code(a: Path, b: Path) -> bool:
    """The same module but for its docstring (a story's versions open with what changed)."""
    def body(path: Path) -> str:
        tree = ast.parse(path.read_text())
        if ast.get_docstring(tree) is not None:
            tree.body = tree.body[1:]
        return ast.dump(tree)
    return body(a) == body(b)


def run_version(workspace: Path, name: str, version: Path, bench_time: float) -> dict:
    target = workspace / "kernels" / f"{name}.py"
    tmp = target.with_suffix(".saving")
    shutil.copyfile(version, tmp)
    tmp.replace(target)  # a save by rename, as editors and agents do
    proc = subprocess.run([sys.executable, "-m", "ktui", "run", "--json", "--bench-time", str(bench_time),
                           str(target)], cwd=workspace, capture_output=True, text=True)
    events = events_of(proc.stdout)
    finished = next((e for e in events if e["type"] == "run_finished"), {})
    dumps = next((e for e in events if e["type"] == "rung_finished" and e.get("rung") == "dumps"), {})
    functions = (dumps.get("figures") or {}).get("functions") or {}
    return {"version": version.name, "changed": what_changed(version), "exit": proc.returncode,
            "verdict": finished.get("verdict") or finished.get("status") or "no verdict",
            "functions": functions, "benchmarks": {shape: b for (_, shape), b in benchmarks(events).items()},
            "stderr": proc.stderr.strip()[-300:] if proc.returncode not in (0, 1) else ""}


def rate(b: dict) -> str:
    f = b["figures"]
    if b["status"] != "ok" or not f.get("kernel_us"):
        return f"{b['status']}"
    value = f"{f['tflops']:.0f} TFLOP/s" if f.get("bound") == "compute-bound" and f.get("tflops") else (
        f"{f['gbps']:.0f} GB/s" if f.get("gbps") else f"{f['kernel_us']:.1f} µs")
    share = f" ({f['roofline']:.0%})" if f.get("roofline") else ""
    return f"{value}{share}, {f.get('speedup', 0):.2f}×"


def markdown(name: str, rows: list[dict], device: str) -> str:
    shapes = sorted({s for r in rows for s in r["benchmarks"]})
    lines = [f"### {name} · {device}", "",
             "| version | what changed | verdict | " + " | ".join(shapes) + " | regs / SASS instr | vs previous |",
             "| --- | --- | --- | " + " | ".join("---" for _ in shapes) + " | --- | --- |"]
    previous: dict[str, float] = {}
    for r in rows:
        cells = [rate(r["benchmarks"][s]) if s in r["benchmarks"] else "—" for s in shapes]
        facts = "; ".join(f"{v.get('registers', '?')} / {v.get('instructions', '?')}" for v in r["functions"].values())
        now = {s: b["figures"]["kernel_us"] for s, b in r["benchmarks"].items()
               if b["status"] == "ok" and b["figures"].get("kernel_us")}
        ratios = [previous[s] / now[s] for s in now if s in previous]
        change = f"{sorted(ratios)[len(ratios) // 2]:.2f}× (median)" if ratios else "—"
        previous = now or previous
        lines.append(f"| {r['version']} | {r['changed']} | {r['verdict']} | " + " | ".join(cells)
                     + f" | {facts or '—'} | {change} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", type=Path, help="a workspace with kernels/ and references/ (copied, not changed)")
    parser.add_argument("name", help="the kernel's file stem in kernels/")
    parser.add_argument("versions", type=Path, nargs="+", help="version files, oldest first")
    parser.add_argument("--bench-time", type=float, default=1.0, metavar="S")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    missing = [str(v) for v in args.versions if not v.is_file()]
    if missing or not (args.workspace / "references").is_dir():
        print(f"version_story: {'missing ' + ', '.join(missing) if missing else 'no references/ in the workspace'}",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ktui-story-") as tmp:
        ws = Path(tmp)
        shutil.copytree(args.workspace / "references", ws / "references")
        (ws / "kernels").mkdir()
        for extra in ("pyproject.toml", ".ktui/calibration.json"):
            if (args.workspace / extra).is_file():
                (ws / extra).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(args.workspace / extra, ws / extra)
        rows = [run_version(ws, args.name, v, args.bench_time) for v in args.versions]
        history = subprocess.run([sys.executable, "-m", "ktui", "history", str(ws / "kernels" / f"{args.name}.py")],
                                 cwd=ws, capture_output=True, text=True).stdout
    device = next((b["device"] for r in rows for b in r["benchmarks"].values()), "no benchmark ran")
    print(markdown(args.name, rows, device))
    shipped = args.workspace / "kernels" / f"{args.name}.py"
    same = shipped.is_file() and same_code(shipped, args.versions[-1])
    print(f"\nthe last version's code {'is' if same else 'is NOT'} the shipped {shipped}'s")
    print("\nktui history:\n" + history)
    for r in rows:
        if r["stderr"]:
            print(f"{r['version']}: exit {r['exit']}: {r['stderr']}", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1, default=str))
    return 0 if any(r["benchmarks"] for r in rows) else 2


if __name__ == "__main__":
    raise SystemExit(main())
