"""How long a caller waits for a verdict: ``ktui run K --no-bench`` one-shot, through the
workspace's daemon and through ``ktui serve``, and the MCP ``run`` tool warm.

Each figure is the median wall time (min and max show the spread) of N runs after one warm-up run
that is not counted, but for the daemon's first call:

- ``cold``: ``ktui run K --no-bench --no-daemon`` with no owner: the command starts its own worker;
- ``daemon 1st``: the first call in a fresh workspace, which starts the daemon (and its worker);
- ``daemon``: every call after it, within the worker's idle time (the daemon's warm worker);
- ``owned``: the same command while ``ktui serve`` owns the workspace (its warm worker runs it);
- ``mcp warm``: one ``run`` call of an MCP session (a worker of its own) whose worker is already warm.

The kernel is a shipped one (default ``add_triton``) in a throwaway workspace; ``--cpu`` runs the
CPU tier on both sides. The device, the date and the commit head the output.
Targets on the H200: daemon ≤ 1.0 s p50 and its first call ≤ 6 s, owned ≤ 1.5 s p50, MCP warm ≤ 1.0 s,
cold ≤ 6 s more than the run's own time; on the CPU tier of a 2-core machine, daemon ≤ 2 s.

    python3 tests/benchmarks/owner_latency.py [--kernel add_triton] [--runs 5] [--cpu]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_startup import commit, device  # noqa: E402


def workspace(root: Path, kernel: str) -> Path:
    (root / "kernels").mkdir(parents=True)
    shutil.copytree(REPO / "references", root / "references")
    shutil.copy(REPO / "kernels" / f"{kernel}.py", root / "kernels")
    return root


OWN: dict[str, list[float]] = {}  # per mode, the run's own time (its worker's, from start to verdict)


def ktui_run(ws: Path, env: dict, kernel: str, cpu: bool, mode: str) -> float:
    argv = [sys.executable, "-m", "ktui", "run", f"kernels/{kernel}.py", "--no-bench", "--no-audit", "--json"]
    started = time.perf_counter()
    proc = subprocess.run(argv + (["--cpu"] if cpu else []), cwd=ws, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"ktui run failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    events = [json.loads(text) for text in proc.stdout.splitlines() if text.startswith("{")]
    finished = [e for e in events if e.get("type") == "run_finished"]
    OWN.setdefault(mode, []).extend(float(f["duration_s"]) for f in finished)
    return seconds


def timed(fn, runs: int, mode: str = "") -> list[float]:
    fn()  # warm-up, not counted
    OWN.pop(mode, None)
    return [fn() for _ in range(runs)]


def mcp_warm(ws: Path, env: dict, kernel: str, cpu: bool, runs: int) -> list[float]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    argv = [sys.executable, "-m", "ktui", "mcp", str(ws)] + (["--cpu"] if cpu else [])
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(ws))
    seconds: list[float] = []

    async def main():
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for i in range(runs + 1):
                    started = time.perf_counter()
                    result = await session.call_tool("run", {"paths": [f"kernels/{kernel}.py"], "no_bench": True})
                    if result.is_error:
                        raise SystemExit(f"MCP run failed: {result.content[0].text}")
                    if i:  # the first call starts the worker: not counted
                        seconds.append(time.perf_counter() - started)

    anyio.run(main)
    return seconds


def line(name: str, seconds: list[float]) -> str:
    return (f"{name:<10} p50 {statistics.median(seconds):6.2f} s   min {min(seconds):6.2f}   max {max(seconds):6.2f}"
            f"   (n={len(seconds)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="add_triton", help="a shipped kernel (default add_triton)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (default 5)")
    parser.add_argument("--cpu", action="store_true", help="the CPU tier, for the owner and the callers alike")
    args = parser.parse_args()
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "KTUI_NO_DAEMON": "1"}  # one-shot, but where a figure says otherwise
    daemon_env = {**env, "KTUI_NO_DAEMON": "0"}
    print(f"# owner latency · {dt.date.today()} · commit {commit()} · {device()} · kernel {args.kernel}"
          f"{' · CPU tier' if args.cpu else ''}")
    with tempfile.TemporaryDirectory(prefix="ktui-owner-latency-") as tmp:
        ws = workspace(Path(tmp) / "ws", args.kernel)
        cold = timed(lambda: ktui_run(ws, env, args.kernel, args.cpu, "cold"), args.runs, "cold")
        print(line("cold", cold), flush=True)
        own = OWN.get("cold", [])
        if len(own) == len(cold):  # the target: a cold run adds at most 6 s to its own time
            added = [wall - mine for wall, mine in zip(cold, own)]
            print(f"{'':<10} its own time p50 {statistics.median(own):6.2f} s; the command added p50 "
                  f"{statistics.median(added):6.2f} s   min {min(added):6.2f}   max {max(added):6.2f}", flush=True)
        first = ktui_run(ws, daemon_env, args.kernel, args.cpu, "daemon")  # starts the daemon: counted alone
        print(line("daemon 1st", [first]), flush=True)
        try:
            print(line("daemon", [ktui_run(ws, daemon_env, args.kernel, args.cpu, "daemon") for _ in range(args.runs)]),
                  flush=True)
        finally:
            subprocess.run([sys.executable, "-m", "ktui", "serve", "--stop"], cwd=ws, env=daemon_env, capture_output=True)
        serve = subprocess.Popen([sys.executable, "-m", "ktui", "serve"] + (["--cpu"] if args.cpu else []), cwd=ws,
                                 env=env, stdout=subprocess.PIPE, text=True)
        try:
            serve.stdout.readline()
            print(line("owned", timed(lambda: ktui_run(ws, env, args.kernel, args.cpu, "owned"), args.runs, "owned")),
                  flush=True)
            if OWN.get("owned"):
                print(f"{'':<10} its own time p50 {statistics.median(OWN['owned']):6.2f} s (the owner's worker)", flush=True)
        finally:
            serve.send_signal(signal.SIGTERM)
            serve.wait(60)
        print(line("mcp warm", mcp_warm(ws, env, args.kernel, args.cpu, args.runs)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
