"""What a new user's first calls cost: a fresh user cache and a fresh workspace holding the shipped
kernels, then ``ktui run kernels/`` (the first benchmark calibrates the GPU), then one kernel again
(the calibration is kept), and, given GPU MODE's problems, a new reference's first run (its audit
must not hold the verdict back).

Each line is timed from the command's start: ``verdict`` is the first line that says a kernel's
verdict, ``exit`` the process's end. The device, the date and the commit head the output.

    python3 tests/benchmarks/first_contact.py [--gpumode CORPUS/gpumode/problems] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_startup import commit, device  # noqa: E402

VERDICT = re.compile(r"\b(passed|failed|satisfied|error)\b")


def timed_lines(argv: list[str], cwd: Path, env: dict[str, str], limit_s: float) -> dict:
    """Run ``argv``; every output line with its time since the start, the first verdict's time, the exit's."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, first = [], None
    assert proc.stdout is not None
    for line in proc.stdout:
        at = time.perf_counter() - t0
        lines.append((round(at, 2), line.rstrip("\n")))
        if first is None and VERDICT.search(line) and " v" in line:
            first = at
        if at > limit_s:
            proc.kill()
            break
    code = proc.wait()
    return {"argv": argv[2:], "exit_code": code, "verdict_s": first, "exit_s": time.perf_counter() - t0,
            "lines": lines}


def stop_daemon(ws: Path, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "ktui", "serve", "--stop"], cwd=ws, env=env, capture_output=True,
                   timeout=60)


def report(name: str, result: dict, keep: re.Pattern) -> None:
    verdict = f"{result['verdict_s']:.2f} s" if result["verdict_s"] is not None else "none"
    print(f"\n## {name}: first verdict {verdict}, exit {result['exit_code']} at {result['exit_s']:.2f} s")
    for at, line in result["lines"]:
        if keep.search(line):
            print(f"  {at:7.2f} s  {line}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpumode", type=Path, help="GPU MODE's problems folder (for linalg/cholesky_py)")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    print(f"# first contact · {device()} · {time.strftime('%Y-%m-%d')} · commit {commit()}")
    tmp = Path(tempfile.mkdtemp(prefix="ktui-first-"))
    env = {**os.environ, "KTUI_USER_DIR": str(tmp / "user"), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("KTUI_NO_DAEMON", None)
    ws = tmp / "ws"
    subprocess.run([sys.executable, "-m", "ktui", "init", str(ws), "--no-context"], env=env, check=True,
                   capture_output=True)
    for folder in ("kernels", "references"):
        for source in (REPO / folder).glob("*.py"):
            shutil.copy(source, ws / folder / source.name)
    results = {}
    keep = re.compile(r"satisfied|calibrat|roofline|attainable")
    try:
        results["all kernels, first run"] = timed_lines(
            [sys.executable, "-m", "ktui", "run", "kernels/", "--bench-time", "1"], ws, env, 500)
        results["add_triton, calibration kept"] = timed_lines(
            [sys.executable, "-m", "ktui", "run", "kernels/add_triton.py", "--bench-time", "1"], ws, env, 120)
    finally:
        stop_daemon(ws, env)
    for name, result in results.items():
        report(name, result, keep)
    if args.gpumode:
        for folder in ("linalg", "pmpp_v2"):  # a problem's task.yml names files of its neighbours
            shutil.copytree(args.gpumode / folder, tmp / "problems" / folder)
        problem = tmp / "problems" / "linalg" / "cholesky_py"
        try:
            results["cholesky_py submission, new reference"] = timed_lines(
                [sys.executable, "-m", "ktui", "run", "submission.py"], problem, env, 300)
        finally:
            stop_daemon(problem, env)
        report("cholesky_py submission, new reference", results["cholesky_py submission, new reference"],
               re.compile(r"."))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
