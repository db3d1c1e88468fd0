"""How fast ``ktui context`` is on a sizable context: the installed Triton and CuTeDSL sources.

Measures, in a throwaway folder: ``ktui context add triton`` and ``add cutedsl`` (copying), the
first index build, a refresh when nothing changed, a refresh after one file changed, and query
times over a set of typical agent queries (in-process, so Python's start-up is not counted;
the CLI adds its own start-up on top). Target: a query in well under a second.

    python3 tests/benchmarks/context_search_speed.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ktui.agentdocs.index import INDEX_NAME, ContextIndex
from ktui.agentdocs.sources import add_source

QUERIES = [
    "make_layout",
    "tl.dot input_precision",
    "TiledMma partition",
    "program_id",
    "shared memory swizzle",
    "cp.async bulk tensor",
    "warpgroup mma",
    "autotune config num_warps",
    "tma descriptor",
    "reduction max",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="times each query runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "context"
        for source in ("triton", "cutedsl"):
            started = time.perf_counter()
            added = add_source(source, context)
            print(f"add {source:8s} {time.perf_counter() - started:6.2f} s  {added.files} files, "
                  f"{added.bytes / 2**20:.1f} MiB  ({added.version})")

        index = ContextIndex(context)
        started = time.perf_counter()
        built = index.refresh()
        print(f"index build    {time.perf_counter() - started:6.2f} s  {built.indexed} files")
        started = time.perf_counter()
        index.refresh()
        print(f"refresh (none) {(time.perf_counter() - started) * 1e3:6.1f} ms")
        touched = next(context.rglob("core.py"))
        touched.write_text(touched.read_text() + "\n# ktui benchmark edit\n")
        started = time.perf_counter()
        changed = index.refresh()
        print(f"refresh (1)    {(time.perf_counter() - started) * 1e3:6.1f} ms  {changed.indexed} file re-indexed")
        print(f"index size     {(context / INDEX_NAME).stat().st_size / 2**20:6.1f} MiB")

        times = []
        for query in QUERIES:
            samples = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                hits = index.search(query, limit=20)
                samples.append(time.perf_counter() - started)
            times.extend(samples)
            top = f"{hits[0].path}:{hits[0].line}" if hits else "no match"
            print(f"query {query!r:28s} median {statistics.median(samples) * 1e3:6.1f} ms  {len(hits):2d} hits  top {top}")
        print(f"all queries    median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms")
        index.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
