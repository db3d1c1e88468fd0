"""What a confined worker lacks on this machine: CUDA's start and an nvcc compile tried under the
worker's confinement, then under it with one more folder opened, or with the network filter or the
scopes left out, each in a process of its own. A variant that works where the plain one fails names
what the rules miss. Run on a GPU machine (it changes nothing there):

    python3 tests/benchmarks/confine_probe.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import os, subprocess, sys, tempfile
    from pathlib import Path
    from ktui.worker import confine as c
    from ktui.worker.confine import landlock as ll
    extra, mode, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    if extra:
        plain = c.rules
        def widened(abi, *a, **k):
            return plain(abi, *a, **k) + [ll.Rule(Path(p), ll.handled_rights(abi)) for p in extra.split(",")]
        c.rules = widened
    if mode == "notrunc":  # the rules before /proc's truncation right: how the driver's 304 looked
        kept = c.rules
        def without_truncate(abi, *a, **k):
            return [ll.Rule(r.path, r.rights & ~ll.TRUNCATE) if str(r.path) == "/proc" else r for r in kept(abi, *a, **k)]
        c.rules = without_truncate
    if mode == "noscope":
        ll.SCOPES_ABI_SAVED = ll.SCOPE_ABSTRACT_UNIX_SOCKET
        ll.SCOPE_ABSTRACT_UNIX_SOCKET = 0
    if mode not in ("off",):
        got = c.confine([work], [], network_allowed="probe" if mode == "net" else "")
        print("confinement:", got.how)
    try:
        import torch
        print("cuda:", torch.cuda.device_count(), float((torch.ones(4, device="cuda") * 2).sum()))
    except Exception as exc:
        print("cuda failed:", str(exc).splitlines()[0][:200])
    src = work / "k.cu"
    src.write_text("#include <limits.h>\\n#include <cuda_runtime.h>\\n__global__ void k(int *x){x[0]=INT_MAX;}\\n")
    done = subprocess.run(["nvcc", "-arch=sm_90a", "-c", str(src), "-o", str(work / "k.o")], capture_output=True, text=True)
    print("nvcc:", done.returncode, (done.stderr.strip().splitlines() or [""])[-1][:200])
""")

VARIANTS = [
    ("", "off"), ("", "on"), ("", "notrunc"), ("", "net"), ("", "noscope"), ("/", "on"), ("/proc", "on"), ("/dev", "on"),
    ("/sys", "on"),
]


def main() -> int:
    print("nvcc:", shutil.which("nvcc"), "cc:", shutil.which("cc"), os.path.realpath(shutil.which("cc") or "-"),
          "gcc:", shutil.which("gcc"))
    for extra, mode in VARIANTS:
        work = Path(tempfile.mkdtemp(prefix="probe-"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, "-c", CHILD, extra, mode, str(work)], capture_output=True, text=True,
                              env=env, timeout=120)
        out = " | ".join(line for line in done.stdout.splitlines() if not line.startswith("confinement"))
        print(f"{mode:8} +{extra or '-':14} {out} {done.stderr.strip().splitlines()[-1][:160] if done.returncode else ''}")
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
