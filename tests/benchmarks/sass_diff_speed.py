"""Benchmark: a 20k-line SASS pair diffs well under a second.

The pair is built from real sm_90a SASS: ``ktui run`` (CPU tier, ahead-of-time compilation) builds
two versions of the shipped Triton add (BLOCK 1024 and 512), the shipped softmax, the two-pass
softmax fixture and the shipped CuTeDSL add, in a throwaway workspace. Their instruction lines are
laid end to end, with fresh addresses and shifted register numbers, into one function of
``--lines`` lines (a large kernel looks like this: many blocks of ordinary code). The "new" side is
the same sequence with every tenth add block taken from the other add version and one load in a
hundred widened to 128 bits, so the diff has real work to do.

Timed: normalisation of both sides, opcode counts, the unified diff and the text report, i.e.
everything ``ktui diff`` does after reading the files. Prints the figures; exits 1 when the median
is not under the limit.

    python3 tests/benchmarks/sass_diff_speed.py [--lines 20000] [--repeat 5] [--limit 1.0]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
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

from ktui.history.sassdiff import _Listing, diff_listings, normalise  # noqa: E402
from ktui.measure.sass import split_functions  # noqa: E402

_ADDR = re.compile(r"/\*[0-9a-f]{4,}\*/")
_REG = re.compile(r"\bR(\d+)\b")


def compile_real_listings(work: Path) -> dict[str, list[str]]:
    """Real SASS instruction lines per function, from two versions of add_triton and three other kernels."""
    root = make_workspace(work / "ws", kernels=["add_triton", "softmax_triton", "add_cutedsl"], fixtures=["softmax_twopass"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def run(*paths: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "ktui", "run", "--seed", "1", *paths], cwd=root, env=env,
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise SystemExit(f"ktui run failed:\n{proc.stdout}\n{proc.stderr}")

    run("kernels/")
    kernel = root / "kernels" / "add_triton.py"
    kernel.write_text(kernel.read_text().replace("block = 1024", "block = 512"))
    run("kernels/add_triton.py")
    listings: dict[str, list[str]] = {}
    for sass in sorted((root / ".ktui" / "runs").rglob("*.sass")):
        version = sass.parent.name
        for fn, lines in split_functions(sass.read_text()).items():
            body = [line for line in lines if _ADDR.search(line)]
            listings[f"{fn}@v{version}"] = body
    return listings


def build_pair(listings: dict[str, list[str]], n_lines: int) -> tuple[list[str], list[str]]:
    add_v1, add_v2 = listings["add_kernel@v1"], listings["add_kernel@v2"]
    others = [v for k, v in listings.items() if not k.startswith("add_kernel@")]
    blocks = [add_v1, *others]
    base: list[str] = []
    new: list[str] = []
    i = 0
    while len(base) < n_lines:
        block = blocks[i % len(blocks)]
        shift = (i * 7) % 64
        swapped = block is add_v1 and i % 10 == 0
        for _j, line in enumerate(block):
            shifted = _REG.sub(lambda m, shift=shift: f"R{(int(m.group(1)) + shift) % 250}", line)
            base.append(shifted)
            changed = shifted
            if (len(new) % 100) == 0 and "LDG.E " in changed:
                changed = changed.replace("LDG.E ", "LDG.E.128 ")
            if not swapped:
                new.append(changed)
        if swapped:
            new.extend(_REG.sub(lambda m, shift=shift: f"R{(int(m.group(1)) + shift) % 250}", line) for line in add_v2)
        i += 1

    def addressed(lines: list[str]) -> list[str]:
        return [_ADDR.sub(f"/*{16 * k:04x}*/", line) for k, line in enumerate(lines[:n_lines])]

    return addressed(base), addressed(new)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--limit", type=float, default=1.0, help="seconds the median must stay under")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ktui-sassbench-"))
    try:
        started = time.perf_counter()
        listings = compile_real_listings(work)
        print(f"compiled {len(listings)} real SASS functions with ktui run (CPU tier, sm_90a) in "
              f"{time.perf_counter() - started:.1f} s: "
              + ", ".join(f"{k} ({len(v)} lines)" for k, v in sorted(listings.items())))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base, new = build_pair(listings, args.lines)
    print(f"pair: {len(base)} and {len(new)} instruction lines in one function")

    times = []
    result = None
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        a = {"big_kernel": _Listing(normalise(base, "big_kernel"), {"registers": 128})}
        b = {"big_kernel": _Listing(normalise(new, "big_kernel"), {"registers": 130})}
        result = diff_listings("bench", 1, 2, a, b)
        text = result.text()
        times.append(time.perf_counter() - t0)
    f = result.functions[0]
    changed = sum(1 for line in f.unified if line.startswith(("+", "-")) and not line.startswith(("+++", "---")))
    print(f"diff: {changed} changed lines, {len(f.unified)} unified-diff lines, {len(text)} characters of report; "
          f"top opcode deltas: {f.opcode_deltas[:4]}")
    median = statistics.median(times)
    print(f"time per diff (normalise both + counts + unified diff + text), {args.repeat} runs: "
          f"median {median * 1000:.0f} ms, min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms "
          f"(limit {args.limit * 1000:.0f} ms)")
    return 0 if median < args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
