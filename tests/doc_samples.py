"""Every sample of ktui's output the docs show, made again from the program: real runs of ktui on
the CPU tier in a fresh temporary workspace, so a sample cannot drift from what ktui prints.

    python3 tests/doc_samples.py            # make every sample again and write it into its page
    python3 tests/doc_samples.py --check    # make them and compare: exit 1 naming each that differs
    python3 tests/doc_samples.py --only h200-run   # one sample (the others are left as they are)

A sample lives in its page between two marker comments, its text one fenced block:

    <!-- sample: NAME -->
    ```
    …
    ```
    <!-- /sample -->

The samples (``SAMPLES``), each with the run that makes it:

- ``first-run`` (README.md): ``ktui run kernels/ --seed 1 --cpu`` in a fresh workspace (``ktui init
  --no-context``, then this repository's ``kernels/`` and ``references/`` copied in), its lines that
  are neither a kernel's header (``== …``) nor a rung's (``[…]``): the summary per kernel and what
  follows them (the first audit of each reference, what it makes of each pending pass). No line of
  these depends on the seed, nor on ``--cpu`` where there is no GPU; ``cpu-run``'s depend on the seed.
- ``cpu-run`` (docs/cli.md): the same run, from ``softmax_triton``'s header (the last kernel) to
  the end, under the command and a ``…`` line standing for the kernels before it.
- ``h200-run`` (docs/cli.md): no run: the lines ``ktui run``'s printer (``ktui.cli.printers.LinePrinter``)
  makes of the events an H200 recorded for ``softmax_triton`` (``tests/fixtures/gpu/roofline/history.jsonl``),
  its benchmark rungs and its summary. Made in this process; nothing varies, nothing is normalised.
- ``mcp-session`` and ``mcp-tools`` (docs/agents.md): one session of ``ktui mcp . --cpu`` through the MCP
  SDK's stdio client, in a second fresh workspace (``ktui init``, its ``context/`` filled offline,
  the shipped and fixture references, the fixture kernels ``wrong_values``, ``raises`` and
  ``triple_zeros``): the calls of ``MCP_CALLS`` in order, each drawn by the rules of ``Call``
  (which progress notifications, how much of the text and of the structured content). ``mcp-tools``
  shows ``profile`` and ``sanitize`` on a machine with no GPU, no ncu and no compute-sanitizer:
  elsewhere (``machine_note``) it is neither written nor checked.

Both workspaces are new, so every reference is audited for the first time, as a user's first run
audits it. Commands run one-shot (``KTUI_NO_DAEMON=1``): no daemon is left behind.

What truly varies from run to run or machine to machine is replaced by a placeholder in what a run
prints (``normalise``), and so written into the doc:

- ``<t>``: a duration in seconds (a rung's ``compile_s=``/``wall_s=`` figure, a summary's last
  part, the audit's ``fast checks, <t> s``, an answer's ``"duration_s"``);
- ``<free>``: the memory free for a checked call (the host's RAM, or what its cgroup leaves);
- ``<ws>``: the temporary workspace's path;
- ``pid N``: the process that audits a reference in the background;
- the sandbox's note where a protection did not hold on this machine is dropped
  (`` · landlock ABI 5: …; not held: signals …``, `` · not confined: …``): the samples show a
  machine where the sandbox holds.

tests/test_docs.py checks every sample against a fresh run (one run of each kind for all of them).
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
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
RECORDING = FIXTURES / "gpu" / "roofline" / "history.jsonl"

# name → the page that shows it
SAMPLES = {
    "first-run": "README.md",
    "cpu-run": "docs/cli.md",
    "h200-run": "docs/cli.md",
    "mcp-session": "docs/agents.md",
    "mcp-tools": "docs/agents.md",
}
RECORDED = ("h200-run",)  # made from a recording, in this process: no run
CLI = ("first-run", "cpu-run")  # made by one `ktui run`
MCP = ("mcp-session", "mcp-tools")  # made by one `ktui mcp` session

RUN_ARGS = ["run", "kernels/", "--seed", "1", "--cpu"]  # --cpu: the CPU tier on a GPU machine too
CPU_RUN_KERNEL = "softmax_triton"
LIMIT_S = 1800  # a safety net: the whole run takes a few minutes on a loaded 2-core machine

# A marker is a line of its own: a page may name one in its text (CONTRIBUTING.md does).
MARKED = re.compile(r"^(<!-- sample: (?P<name>[\w-]+) -->\n```\n)(?P<text>.*?)^(```\n<!-- /sample -->)$", re.S | re.M)
OPENED = re.compile(r"^<!-- sample: ([\w-]+) -->$", re.M)

PLACEHOLDERS = [
    # a rung's seconds figure: compile_s=1.44, wall_s=0.07, inputs_made_ahead_s=0.3
    (re.compile(r"\b(\w+_s)=\d+(?:\.\d+)?\b"), r"\1=<t>"),
    # a summary line's duration, its last part
    (re.compile(r" · \d+(?:\.\d+)? s$", re.M), " · <t> s"),
    # the first audit's line
    (re.compile(r"\(fast checks, \d+(?:\.\d+)? s\)"), "(fast checks, <t> s)"),
    # an answer's duration
    (re.compile(r'"duration_s": ?\d+(?:\.\d+)?'), '"duration_s":<t>'),
    # the memory free for a checked call
    (re.compile(r"\d+(?:\.\d+)? GB free on the host's RAM(?: within its cgroup's \d+(?:\.\d+)? GB limit)?"),
     "<free> GB free on the host's RAM"),
    # the process that audits in the background: ``the MCP server (pid 25857) audits it``
    (re.compile(r"\(pid \d+"), "(pid N"),
    # the sandbox's note where a protection did not hold
    (re.compile(r" · (?:landlock ABI \d+: |not confined)[^·\n]*?(?= · |$)", re.M), ""),
]


def normalise(text: str, workspace: Path | None = None) -> str:
    """``text`` with what varies from run to run replaced by its placeholder (the module's doc)."""
    if workspace is not None:
        for path in {str(workspace), str(workspace.resolve())}:
            text = text.replace(path, "<ws>")
    for pattern, placeholder in PLACEHOLDERS:
        text = pattern.sub(placeholder, text)
    return text


# -- the pages ------------------------------------------------------------------------------------
def samples_in(text: str) -> dict[str, str]:
    """Each marked sample of a page's text, by name (its fenced block's text, ending in a newline)."""
    found = {m["name"]: m["text"] for m in MARKED.finditer(text)}
    unclosed = [name for name in OPENED.findall(text) if name not in found]
    if unclosed:
        raise ValueError(f"sample {unclosed[0]}: no fenced block closed by <!-- /sample --> after its marker")
    return found


def with_sample(text: str, name: str, sample: str) -> str:
    """The page's text with the sample ``name`` replaced by ``sample``."""
    if name not in samples_in(text):
        raise ValueError(f"no sample {name} in the page")
    return MARKED.sub(lambda m: m.group(1) + sample + m.group(4) if m["name"] == name else m.group(0), text)


def documented() -> dict[str, str]:
    """Every sample the docs show now, by name."""
    found = {}
    for page in sorted(set(SAMPLES.values())):
        found.update(samples_in((REPO / page).read_text()))
    return found


# -- h200-run: the printer on a recording ---------------------------------------------------------
def recorded_samples() -> dict[str, str]:
    from ktui.cli.printers import LinePrinter
    from ktui.protocol.events import event_from_json

    printed, printer = StringIO(), LinePrinter()
    with redirect_stdout(printed):
        for line in RECORDING.read_text().splitlines():
            event = json.loads(line)
            if event["run_id"].startswith(f"h200-{CPU_RUN_KERNEL}-"):
                printer(event_from_json(event))
    lines = printed.getvalue().splitlines()
    kept = [x for x in lines if x.startswith("[benchmark") or x.startswith(f"{CPU_RUN_KERNEL} v")]
    return {"h200-run": "\n".join(kept) + "\n"}


# -- first-run and cpu-run: one `ktui run` -----------------------------------------------------
def env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "KTUI_NO_DAEMON": "1"}


def ktui(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "ktui", *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=LIMIT_S)
    if done.returncode != 0:
        raise RuntimeError(f"ktui {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done


def cli_workspace(root: Path) -> Path:
    """``ktui init`` and this repository's kernels and references: the README's first command's."""
    ws = root / "first-run"
    ktui("init", str(ws), "--no-context", cwd=root)
    for folder in ("kernels", "references"):
        for file in (REPO / folder).glob("*.py"):
            shutil.copy(file, ws / folder / file.name)
    return ws


def cli_samples(stdout: str) -> dict[str, str]:
    """first-run and cpu-run from the output of one ``ktui run kernels/ --seed 1``."""
    lines = stdout.splitlines()
    summaries = [x for x in lines if not x.startswith(("== ", "["))]
    start = next(i for i, x in enumerate(lines) if x.startswith(f"== {CPU_RUN_KERNEL} v"))
    cpu_run = [f"$ ktui {' '.join(RUN_ARGS)}", "…", *lines[start:]]
    return {"first-run": "\n".join(summaries) + "\n", "cpu-run": "\n".join(cpu_run) + "\n"}


def run_cli(root: Path) -> dict[str, str]:
    ws = cli_workspace(root)
    return {name: normalise(text, ws) for name, text in cli_samples(ktui(*RUN_ARGS, cwd=ws).stdout).items()}


# -- mcp-session and mcp-tools: one `ktui mcp` session ---------------------------------------------
ELIDED = "\u2026elided"  # stands for what an abridged answer leaves out; drawn as a bare …


@dataclass
class Call:
    """One tool call and how its sample draws it: ``→ tool {arguments}``, then the last ``progress``
    notifications, the first ``lines`` lines of its text content (``… `` marks more), and its
    structured content as compact JSON: with ``keep``, only those keys of each object (the others
    drawn as one ``…``), lists past ``items`` entries cut, strings past ``cut`` characters cut."""

    sample: str
    tool: str
    arguments: dict[str, Any]
    progress: int = 0
    text: bool = True
    lines: int = 0  # 0: all of them
    structured: bool = False
    keep: frozenset[str] = field(default_factory=frozenset)  # empty: every key
    items: int = 0  # 0: every entry
    cut: int = 0  # 0: whole strings


KERNEL_KEYS = frozenset({"kernels", "kernel", "path", "version", "verdict", "tier", "summary", "correct", "trusted",
                         "first_failure", "rung", "status", "message", "where_wrong", "error_type", "file", "line",
                         "where", "excerpt", "run_dir", "all_passed", "all_trusted", "audits", "reference", "weak"})
MCP_CALLS = [
    Call("mcp-session", "run", {"paths": ["kernels/wrong_values.py"], "no_bench": True, "seed": 1}, progress=2,
         structured=True, keep=KERNEL_KEYS, cut=40),
    Call("mcp-session", "run", {"paths": ["kernels/raises.py"], "no_bench": True}, structured=True,
         keep=frozenset({"kernels", "first_failure", "rung", "status", "message", "error_type", "file", "line", "where",
                         "excerpt"})),
    Call("mcp-session", "run", {"paths": ["kernels/add_triton.py"], "seed": 1}),
    Call("mcp-session", "run", {"paths": ["kernels/triple_zeros.py"], "no_bench": True}),
    Call("mcp-session", "dump", {"kernel": "add_triton", "kind": "sass", "max_chars": 200}, lines=2),
    Call("mcp-session", "run", {"paths": ["kernels/add_triton.py"], "remote": True}),
    Call("mcp-session", "latest", {"kernel": "nope"}),
    Call("mcp-tools", "audit", {"path": "references/add.py", "fast": True, "seed": 1}, text=False, structured=True,
         keep=frozenset({"references", "reference", "verdict", "weak", "checks", "check", "status", "all_strong"}),
         items=2),
    Call("mcp-tools", "output", {"kernel": "add_triton"}, text=False, structured=True,
         keep=frozenset({"printed", "text", "note"})),
    Call("mcp-tools", "profile", {"kernel": "add_triton"}),
    Call("mcp-tools", "sanitize", {"kernel": "add_triton"}),
    Call("mcp-tools", "context_search", {"query": "make_layout", "limit": 2}, text=False, structured=True,
         keep=frozenset({"hits", "file", "line", "snippet", "sources"})),
    Call("mcp-tools", "context_search", {"query": "zqxjv"}, text=False, structured=True),
]
WIDTH = 120  # a structured answer's lines are wrapped after a comma at this width
FIXTURE_KERNELS = ("wrong_values", "raises", "triple_zeros")
FIXTURE_REFERENCES = ("double_zeros",)


def abridged(value: Any, call: Call) -> Any:
    if isinstance(value, dict):
        kept = {k: abridged(v, call) for k, v in value.items() if not call.keep or k in call.keep}
        if len(kept) < len(value):
            kept[ELIDED] = ELIDED
        return kept
    if isinstance(value, list):
        if call.items and len(value) > call.items:
            return [abridged(v, call) for v in value[: call.items]] + [ELIDED]
        return [abridged(v, call) for v in value]
    if isinstance(value, str) and call.cut and len(value) > call.cut:
        return value[: call.cut] + "…"
    return value


def compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace(f'"{ELIDED}":"{ELIDED}"', "…").replace(f'"{ELIDED}"', "…")


def pieces(text: str) -> list[str]:
    """Compact JSON cut after each comma between two values (never inside a string)."""
    found, start, quoted, escaped = [], 0, False, False
    for i, char in enumerate(text):
        if quoted:
            quoted, escaped = (char != '"' or escaped), (char == "\\" and not escaped)
        elif char == '"':
            quoted = True
        elif char == ",":
            found.append(text[start : i + 1])
            start = i + 1
    return [*found, text[start:]]


def wrapped(text: str, first: str, indent: str) -> list[str]:
    """``text`` after ``first``, broken after a comma between values where a line would pass ``WIDTH``."""
    lines, line = [], first
    for piece in pieces(text):
        if len(line) + len(piece) > WIDTH and line not in (first, indent):
            lines.append(line)
            line = indent
        line += piece
    return [*lines, line]


def drawn(call: Call, result, progress: list[tuple[float, float | None, str]]) -> list[str]:
    out = [f"→ {call.tool} {compact(call.arguments)}"]
    for done, total, message in progress[-call.progress:] if call.progress else []:
        out.append(f"   progress {done:g}/{total:g}: {message}" if total else f"   progress {done:g}: {message}")
    text = "\n".join(c.text for c in result.content if getattr(c, "text", None) is not None)
    if result.is_error:
        return [*out, f"← error: {text}"]
    if call.text:
        lines = text.splitlines() or [""]
        shown = lines[: call.lines] if call.lines else lines
        shown = [*shown[:-1], shown[-1] + " …"] if len(shown) < len(lines) else shown
        out += [f"← text: {shown[0]}", *(f"        {x}" for x in shown[1:])]
    if call.structured:
        label = "← structured: " if call.text else "← "
        out += wrapped(compact(abridged(result.structured_content, call)), label, "   ")
    return out


def mcp_workspace(root: Path) -> Path:
    ws = root / "mcp"
    ktui("init", str(ws), cwd=root)
    for file in (REPO / "references").glob("*.py"):
        shutil.copy(file, ws / "references" / file.name)
    for name in FIXTURE_REFERENCES:
        shutil.copy(FIXTURES / "references" / f"{name}.py", ws / "references" / f"{name}.py")
    for name in FIXTURE_KERNELS:
        shutil.copy(FIXTURES / "kernels" / f"{name}.py", ws / "kernels" / f"{name}.py")
    return ws


async def mcp_session(ws: Path, errlog) -> dict[str, list[str]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    variables = env()
    # the SDK hands the server a few variables of its own choosing: ours go by name
    passed = {k: variables[k] for k in ("PYTHONPATH", "KTUI_NO_DAEMON", "KTUI_USER_DIR", "PATH") if k in variables}
    params = StdioServerParameters(command=sys.executable, args=["-m", "ktui", "mcp", ".", "--cpu"], env=passed,
                                   cwd=str(ws))
    drawn_calls: dict[str, list[str]] = {name: [] for name in MCP}
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        hello = await session.initialize()
        drawn_calls["mcp-tools"].append(f"initialize: server {hello.server_info.name} {hello.server_info.version}")
        for call in MCP_CALLS:
            progress: list[tuple[float, float | None, str]] = []

            async def noted(done, total, message, progress=progress):
                progress.append((done, total, message))

            result = await session.call_tool(call.tool, call.arguments, progress_callback=noted)
            lines = drawn_calls[call.sample]
            if lines and call.sample == "mcp-session":
                lines.append("")
            lines += drawn(call, result, progress)
    return drawn_calls


def run_mcp(root: Path) -> dict[str, str]:
    import anyio

    ws = mcp_workspace(root)
    with (root / "mcp-server.stderr").open("w") as errlog:
        drawn_calls = anyio.run(mcp_session, ws, errlog)
    return {name: normalise("\n".join(lines) + "\n", ws) for name, lines in drawn_calls.items()}


def machine_note() -> str:
    """Why this machine would answer ``mcp-tools``' ``profile`` and ``sanitize`` otherwise than the
    sample shows (a GPU, ncu or compute-sanitizer found here), or "" where it would not."""
    from ktui.measure.gpu_presence import no_gpu_reason
    from ktui.measure.tools import find_tool
    from ktui.profiling.profile import NCU_PATTERNS
    from ktui.profiling.sanitize import SANITIZER_PATTERNS

    found = [name for name, variable, patterns in (("ncu", "KTUI_NCU", NCU_PATTERNS),
                                                   ("compute-sanitizer", "KTUI_COMPUTE_SANITIZER", SANITIZER_PATTERNS))
             if find_tool(name, variable, patterns)]
    if no_gpu_reason() is None:
        found.append("a GPU")
    return (f"this machine has {' and '.join(found)}: mcp-tools shows profile and sanitize where there is none"
            if found else "")


# -- all of them ----------------------------------------------------------------------------------
def made(names: list[str], root: Path) -> dict[str, str]:
    """The samples ``names`` made again, in a workspace under ``root``."""
    found: dict[str, str] = {}
    if set(names) & set(RECORDED):
        found.update(recorded_samples())
    if set(names) & set(CLI):
        found.update(run_cli(root))
    if set(names) & set(MCP):
        found.update(run_mcp(root))
    return {name: found[name] for name in names}


def differences(fresh: dict[str, str], shown: dict[str, str]) -> list[str]:
    import difflib

    problems = []
    for name, text in fresh.items():
        if name not in shown:
            problems.append(f"{name}: {SAMPLES[name]} has no marked sample {name}")
        elif shown[name] != text:
            diff = difflib.unified_diff(shown[name].splitlines(), text.splitlines(), f"{SAMPLES[name]} ({name})",
                                        "a fresh run", lineterm="", n=1)
            problems.append("\n".join(diff))
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing: exit 1 when a sample differs")
    parser.add_argument("--only", action="append", choices=sorted(SAMPLES), help="this sample only (repeatable)")
    args = parser.parse_args()
    names = args.only or list(SAMPLES)
    with tempfile.TemporaryDirectory(prefix="ktui-doc-samples-") as tmp:
        fresh = made(names, Path(tmp))
    if args.check:
        if note := machine_note() if "mcp-tools" in fresh else "":
            print(f"mcp-tools not checked: {note}")
            fresh.pop("mcp-tools")
        problems = differences(fresh, documented())
        print("\n\n".join(problems) if problems else f"{len(fresh)} sample(s) as a fresh run makes them")
        return 1 if problems else 0
    note = machine_note() if "mcp-tools" in fresh else ""
    if note:
        print(f"{SAMPLES['mcp-tools']}: mcp-tools not written: {note}")
        fresh.pop("mcp-tools")
    for name, text in fresh.items():
        page = REPO / SAMPLES[name]
        before = page.read_text()
        after = with_sample(before, name, text)
        if after != before:
            page.write_text(after)
            print(f"{SAMPLES[name]}: {name} written")
        else:
            print(f"{SAMPLES[name]}: {name} as it was")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
