"""An agent's session through ``ktui mcp``, step by step: how long each call takes and what it answers.

The client is the MCP Python SDK's own (``stdio_client`` + ``ClientSession``), as an agent's would be.
In a throwaway workspace made by ``ktui init`` (this repository's references/ copied in):

1. ``init``: ``python3 -m ktui init`` as a whole process;
2. ``connect``: the server's start and the initialize handshake; ``list_tools``;
3. ``run`` of a first, wrong kernel (the shipped one with its ``mask = a < b`` made ``a < b - 1``):
   failed is expected, its first failure is shown (this first call also starts the server's worker
   and audits the reference: its time includes both);
4. ``run`` of the fixed kernel (the shipped one, as it is): passed is expected;
5. ``profile`` (Nsight Compute, GPU only: elsewhere the tool answers an error, shown as it is);
6. ``hotspots`` and ``history``;
7. ``run`` again of the same, unchanged file: whether the same worker process ran it (the worker is
   this process's descendant carrying ktui's worker token; after each run it is compared with the
   one after the run before; the JSON's ``warm`` is the last run's).

Each row: the call's wall seconds, its status (the verdict, ok, or error) and a one-line summary.
Exit 1 when the session itself broke (the server died, a call raised, run/hotspots/history answered
an error), 2 when a run's verdict was not the one expected, else 0. The device, the date and the
commit head the output; ``--cpu`` runs the CPU tier, for a machine without a GPU.

    python3 tests/benchmarks/mcp_session.py [--kernel softmax_triton] [--cpu] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
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
sys.path.insert(0, str(REPO))

from cli_startup import commit, device  # noqa: E402

from ktui.protocol.processes import TOKEN_ENV, descendants  # noqa: E402

BROKE, UNEXPECTED = 1, 2
MASK = re.compile(r"(mask\s*=\s*\w+\s*<\s*)(\w+)")


def versions(kernel: str) -> tuple[str, str]:
    """The shipped kernel made wrong (an off-by-one mask: the last element of a row, or of the
    tensor, is never written), and as shipped."""
    file = REPO / "kernels" / f"{kernel}.py"
    if not file.is_file():
        raise SystemExit(f"--kernel {kernel}: no {file}")
    source = file.read_text()
    broken, n = MASK.subn(r"\1(\2 - 1)", source, count=1)
    if not n:
        raise SystemExit(f"--kernel {kernel}: no `mask = a < b` line to make wrong")
    return broken, source


def workers() -> list[int]:
    """This process's descendants that carry the worker token: the server's warm worker."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(f"{TOKEN_ENV}=".encode()) for e in environ):
            found.append(pid)
    return sorted(found)


def one_line(text: str, width: int = 10**6) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


class Session:
    """The rows of the table, and what the exit status will be."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.exit = 0
        self.workers: list[int] = []  # the worker's pid after the last run
        self.warm = False  # whether the last run ran on the worker of the run before it

    def add(self, step: str, seconds: float, status: str, summary: str) -> None:
        self.steps.append({"step": step, "seconds": round(seconds, 3), "status": status, "summary": one_line(summary)})
        print(f"  {step:<22} {seconds:7.2f} s  {status:<8} {one_line(summary, 100)}", file=sys.stderr, flush=True)

    async def call(self, session, step: str, tool: str, arguments: dict, must_answer: bool = True):
        started = time.perf_counter()
        result = await session.call_tool(tool, arguments)
        seconds = time.perf_counter() - started
        if result.is_error:
            self.add(step, seconds, "error", result.content[0].text if result.content else "(no text)")
            if must_answer:
                self.exit = BROKE
            return None
        return seconds, result.structured_content

    async def run(self, session, step: str, path: str, expected: str) -> dict | None:
        answer = await self.call(session, step, "run", {"paths": [path]})
        if answer is None:
            return None
        seconds, out = answer
        (k,) = out["kernels"]
        before, self.workers = self.workers, workers()
        self.warm = bool(before) and before == self.workers
        said = f"v{k['version']} on the {k['tier']} tier"
        if failure := k.get("first_failure"):
            where = f" at {failure['where']}" if failure.get("where") else ""
            said += f"; first failure: {failure['rung']}: {failure['message']}{where}"
        if k["verdict"] != expected:
            said += f" (expected {expected})"
            self.exit = self.exit or UNEXPECTED
        said += "".join(f"; reference audited: {a.get('verdict')}" for a in out.get("audits", []))
        pids = ", ".join(map(str, self.workers)) or "none left"
        said += "; " + (
            f"worker started (pid {pids})"
            if not before
            else f"warm worker (pid {pids})"
            if self.warm
            else f"not the same worker: pid {', '.join(map(str, before))}, now {pids}"
        )
        self.add(step, seconds, k["verdict"], said)
        self.steps[-1]["worker_pids"] = self.workers
        return k


async def agent(ws: Path, env: dict, kernel: str, cpu: bool, record: Session) -> None:
    """Steps 2 to 7, recorded in ``record``."""
    from mcp import ClientSession, StdioServerParameters, stdio_client

    argv = [sys.executable, "-m", "ktui", "mcp", str(ws)] + (["--cpu"] if cpu else [])
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(ws))
    path, (broken, shipped) = f"kernels/{kernel}.py", versions(kernel)
    # The server's stderr goes to a file beside the workspace, shown when the session broke.
    with (ws.parent / "server.stderr").open("w") as errlog:
        started = time.perf_counter()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            hello = await session.initialize()
            record.add(
                "connect",
                time.perf_counter() - started,
                "ok",
                f"{hello.server_info.name} {hello.server_info.version}, protocol {hello.protocol_version}",
            )
            started = time.perf_counter()
            tools = sorted(t.name for t in (await session.list_tools()).tools)
            record.add("list_tools", time.perf_counter() - started, "ok", f"{len(tools)} tools: {', '.join(tools)}")

            (ws / path).write_text(broken)
            await record.run(session, "run (wrong kernel)", path, "failed")
            (ws / path).write_text(shipped)
            if await record.run(session, "run (fixed kernel)", path, "passed") is None:
                return

            if answer := await record.call(session, "profile", "profile", {"kernel": path}, must_answer=False):
                seconds, out = answer
                s = out.get("summary") or {}
                record.add(
                    "profile",
                    seconds,
                    "ok",
                    f"{len(s.get('kernels', []))} kernels profiled, "
                    f"{s.get('total_duration_us', 0):.1f} µs in all on {s.get('shape')} ({s.get('device')})",
                )
            if answer := await record.call(session, "hotspots", "hotspots", {"kernel": path, "top": 3}):
                seconds, out = answer
                lines = [x for fn in out.get("static", []) for x in fn.get("lines", [])][:1]
                top = f"; hottest static line {lines[0]['at']}" if lines else ""
                record.add(
                    "hotspots",
                    seconds,
                    "ok",
                    f"v{out['version']}: {len(out.get('static', []))} functions, "
                    f"measured {'yes' if out.get('measured') else 'no'}{top}",
                )
            if answer := await record.call(session, "history", "history", {"kernel": path}):
                seconds, out = answer
                record.add(
                    "history",
                    seconds,
                    "ok",
                    f"{len(out['runs'])} versions: "
                    + ", ".join(f"v{r['version']} {r['verdict']}" for r in out["runs"]),
                )

            await record.run(session, "run (unchanged, again)", path, "passed")


def main() -> int:
    import anyio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="softmax_triton", help="a shipped Triton kernel (default softmax_triton)")
    parser.add_argument("--cpu", action="store_true", help="the CPU tier: the server runs with --cpu")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the steps and the header as JSON")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    header = {
        "device": device(),
        "date": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "commit": commit(),
        "kernel": args.kernel,
        "tier": "cpu" if args.cpu else "gpu",
    }
    versions(args.kernel)  # a kernel that cannot be made wrong is refused before anything starts
    record = Session()
    with tempfile.TemporaryDirectory(prefix="ktui-mcp-session-") as tmp:
        ws = Path(tmp) / "ws"
        started = time.perf_counter()
        init = subprocess.run([sys.executable, "-m", "ktui", "init", str(ws)], env=env, capture_output=True, text=True)
        seconds, out = time.perf_counter() - started, init.stdout.splitlines()
        context = [x.split(":")[0].strip() for x in out if re.match(r"\s*context/\w+: \d+ files", x)]
        said = (
            f"wrote {sum('wrote ' in x for x in out)} files; {', '.join(context) or 'no context/ sources'}"
            if init.returncode == 0
            else f"exit {init.returncode}: {init.stderr.strip()[-300:]}"
        )
        record.add("init", seconds, "ok" if init.returncode == 0 else "error", said)
        if init.returncode != 0:
            record.exit = BROKE
        else:
            shutil.copytree(REPO / "references", ws / "references", dirs_exist_ok=True)
            try:
                anyio.run(agent, ws, env, args.kernel, args.cpu, record)
            except Exception as exc:  # the session broke: what was measured so far is still shown
                while getattr(exc, "exceptions", None):  # an exception group: its first
                    exc = exc.exceptions[0]
                record.add("(session broke)", 0.0, "error", f"{type(exc).__name__}: {exc}")
                print((Path(tmp) / "server.stderr").read_text()[-4000:], file=sys.stderr)
                record.exit = BROKE
    print(
        f"# MCP session · {header['date']} · commit {header['commit']} · {header['device']} · kernel {args.kernel}"
        f"{' · CPU tier' if args.cpu else ''}\n"
    )
    print("| # | step | seconds | status | summary |\n|---|---|---:|---|---|")
    for i, s in enumerate(record.steps, 1):
        print(f"| {i} | {s['step']} | {s['seconds']:.2f} | {s['status']} | {one_line(s['summary'], 160)} |")
    if args.json:
        args.json.write_text(
            json.dumps({**header, "steps": record.steps, "warm": record.warm, "exit": record.exit}, indent=2) + "\n"
        )
    return record.exit


if __name__ == "__main__":
    sys.exit(main())
