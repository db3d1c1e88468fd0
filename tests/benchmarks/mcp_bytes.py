"""How many bytes an agent reads for one run → fix → run loop through ``ktui mcp``: the figure of
docs/agents.md, measured on any checkout of ktui (``--src``), so two commits compare on one machine.

The client is the MCP Python SDK's own (``stdio_client`` + ``ClientSession``), as an agent's would
be. The server runs behind a proxy in this script that counts every line it writes to the client
(each is one JSON-RPC message), so the figures are the bytes on the wire, not a re-serialisation.
In a workspace made here (this repository's references/ and the shipped kernel):

1. ``run`` of the kernel with a planted bug (its ``mask = a < b`` made ``a < (b - 1)``: the last
   element of each row is never written): failed is expected;
2. the fix (the shipped kernel, as it is);
3. ``run`` again: passed is expected.

Both runs pass ``seed=1`` (the same inputs at both commits) and audit the reference as an agent's
run does by default (the first run's answer carries the audit). Per call the table gives the
bytes of its answer (the JSON-RPC result: text content and structured content together), of its
text content alone (what a client that shows only text hands the model), of its structured
content alone, and of its progress notifications. Exit 1 when a verdict is not the expected one
or the session broke.

    python3 tests/benchmarks/mcp_bytes.py [--src CHECKOUT [--commit C]] [--kernel softmax_triton] [--json PATH]

Another commit, without touching a worktree: ``git archive C | tar -x -C DIR``, then ``--src DIR --commit C``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_startup import device  # noqa: E402
from mcp_session import versions  # noqa: E402


def proxy(log: Path, argv: list[str]) -> int:
    """Run ``argv`` with this process's stdin and stdout, writing the length of each line it prints
    (one JSON-RPC message each) and the line itself to ``log``."""
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def forward_in() -> None:
        for chunk in iter(lambda: sys.stdin.buffer.read1(65536), b""):
            child.stdin.write(chunk)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=forward_in, daemon=True).start()
    with log.open("ab") as out:
        for line in child.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            out.write(line)
            out.flush()
    return child.wait()


def commit_of(src: Path) -> str:
    found = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def messages(log: Path) -> list[dict]:
    """What the server wrote, one JSON-RPC message per line, with its size in bytes."""
    found = []
    for line in log.read_bytes().splitlines():
        if line.strip():
            found.append({"bytes": len(line) + 1, **json.loads(line)})
    return found


def loop(ws: Path, src: Path, kernel: str, log: Path) -> list[dict]:
    """The three steps; per ``run`` call its id and verdict."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    server = [sys.executable, "-m", "ktui", "mcp", str(ws), "--cpu"]
    argv = [sys.executable, __file__, "--proxy", str(log), "--", *server]
    env = {**os.environ, "PYTHONPATH": str(src)}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(ws))
    path, (broken, shipped) = f"kernels/{kernel}.py", versions(kernel)
    calls: list[dict] = []

    async def main() -> None:
        with (ws.parent / "server.stderr").open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for step, source in (("run (planted bug)", broken), ("run (fixed)", shipped)):
                    (ws / path).write_text(source)
                    started = time.perf_counter()
                    result = await session.call_tool("run", {"paths": [path], "seed": 1},
                                                     progress_callback=lambda *_: anyio.sleep(0))
                    answer = result.structured_content or {}
                    verdict = answer.get("kernels", [{}])[0].get("verdict") if not result.is_error else "error"
                    calls.append({"step": step, "verdict": verdict, "seconds": round(time.perf_counter() - started, 2)})

    anyio.run(main)
    return calls


def measure(log: Path, calls: list[dict]) -> list[dict]:
    """Each ``run`` call's answer and progress bytes, in call order (the server answers them in turn)."""
    said = messages(log)
    answers = [m for m in said if "result" in m and isinstance(m["result"], dict) and "content" in m["result"]]
    progress: list[list[dict]] = [[] for _ in answers]
    answered = 0
    for m in said:  # progress notes come before the answer of the call they belong to
        if m in answers:
            answered += 1
        elif m.get("method") == "notifications/progress" and answered < len(progress):
            progress[answered].append(m)
    rows = []
    for call, answer, notes in zip(calls, answers, progress):
        result = answer["result"]
        text = sum(len(c.get("text", "").encode()) for c in result.get("content", []))
        structured = result.get("structuredContent")
        rows.append({**call, "answer_bytes": answer["bytes"], "text_bytes": text,
                     "structured_bytes": len(json.dumps(structured, separators=(",", ":")).encode()) if structured else 0,
                     "progress_notes": len(notes), "progress_bytes": sum(n["bytes"] for n in notes)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=REPO, help="the ktui checkout to measure (default: this one)")
    parser.add_argument("--kernel", default="softmax_triton", help="a shipped Triton kernel (default softmax_triton)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the rows and the header as JSON")
    parser.add_argument("--commit", help="the commit --src holds, where it is not a git checkout (git archive C | tar -x)")
    args = parser.parse_args()
    src = args.src.resolve()
    header = {"device": device(), "date": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
              "commit": args.commit or commit_of(src), "src": str(src), "kernel": args.kernel, "tier": "cpu"}
    with tempfile.TemporaryDirectory(prefix="ktui-mcp-bytes-") as tmp:
        ws = Path(tmp) / "ws"
        (ws / "kernels").mkdir(parents=True)
        shutil.copytree(REPO / "references", ws / "references")
        log = Path(tmp) / "server.jsonl"
        try:
            rows = measure(log, loop(ws, src, args.kernel, log))
        except Exception as exc:
            while getattr(exc, "exceptions", None):
                exc = exc.exceptions[0]
            print(f"the session broke: {type(exc).__name__}: {exc}", file=sys.stderr)
            print((Path(tmp) / "server.stderr").read_text()[-3000:], file=sys.stderr)
            return 1
    expected = ["failed", "passed"]
    print(f"# MCP bytes of one run → fix → run loop · {header['date']} · commit {header['commit']} · "
          f"{header['device']} · kernel {args.kernel} · CPU tier\n")
    print("| step | verdict | s | answer B | text B | structured B | progress notes | progress B |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['step']} | {r['verdict']} | {r['seconds']:.1f} | {r['answer_bytes']} | {r['text_bytes']} | "
              f"{r['structured_bytes']} | {r['progress_notes']} | {r['progress_bytes']} |")
    totals = {k: sum(r[k] for r in rows) for k in ("answer_bytes", "text_bytes", "structured_bytes", "progress_bytes")}
    print(f"| **loop** | | | {totals['answer_bytes']} | {totals['text_bytes']} | {totals['structured_bytes']} | | "
          f"{totals['progress_bytes']} |")
    if args.json:
        args.json.write_text(json.dumps({**header, "rows": rows, "totals": totals}) + "\n")
    return 0 if [r["verdict"] for r in rows] == expected else 1


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--proxy":
        sys.exit(proxy(Path(sys.argv[2]), sys.argv[4:]))
    sys.exit(main())
