"""The MCP server: one tool per thing an agent does in the loop, answering structured JSON.

Every tool validates its arguments and answers a bad call with an error result (``ToolError``),
never by crashing the server. Results are the JSON ``ktui run --json`` and the other commands'
``--json`` produce, trimmed to what an agent reads first. User code runs only in the worker and in
the ``ktui profile``/``ktui sanitize`` children of those two tools.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ktui import __version__
from ktui.agentdocs.index import search
from ktui.agentdocs.sources import no_match_hint, sources_in
from ktui.agents import stored
from ktui.agents.answers import KtuiMcp
from ktui.agents.audit_and_output_tools import add_tools
from ktui.agents.child_calls import ChildCalls, ChildResult
from ktui.agents.declared import declare
from ktui.agents.digest import run_digest, trust_now
from ktui.agents.dumps import DEFAULT_PAGE_CHARS, KINDS, MAX_PAGE_CHARS, read_dump
from ktui.agents.hotspots import read_hotspots
from ktui.agents.prompts import add_prompts
from ktui.agents.run_audits import audit_after_run, audit_later
from ktui.agents.runs import RunService
from ktui.agents.verdicts import verdict_now
from ktui.agents.workspace import MAX_PATH_CHARS, AgentWorkspace, BadCall
from ktui.agents.workspace_tools import add_workspace_tools
from ktui.history import linediff, rooflines
from ktui.history.current import report_is_current
from ktui.history.reports import latest_path
from ktui.history.sassdiff import DiffError, diff_versions, resolve_base
from ktui.history.store import Store
from ktui.protocol.events import PASSED
from ktui.protocol.job import Options
from ktui.workspace.kernels import Kernel, ProblemError, discover, state_dir
from ktui.workspace.versions import current_version

INSTRUCTIONS = """ktui verifies GPU kernels (Triton, CuTeDSL, TileLang) against a trusted reference.
`kernels` lists the workspace's kernels with their latest verdict. The loop (the prompt `satisfy`
says it in full): write or edit kernels/<op>_<variant>.py, call `run`, read `first_failure` (file:line
and excerpt; `where_wrong` says where a wrong output is wrong, e.g. "never written: cols 112–114 of
every row (the last 3 columns)"; `latest` and `dump` kind=error_map give its grid), fix, repeat. A pass counts only when `summary.trusted` is true: false names why the test
proves nothing (`trust_reasons`: a weak test, no signal on every shape: fix the reference's test or
say so, never claim the kernel works), "pending" means the reference is not audited yet (`run` answers
at its verdicts and its audit goes on in the background: a later `run`, `latest` or `kernels` says what
it found; `strict` waits for it; else call `audit`). When it passes, `diff` (SASS against the previous
version, or a `pin`ned one), `hotspots` (which of your lines the instructions and, once profiled, the stalls come from) and `profile` (Nsight
Compute, GPU) tell you what to change; stop when the summary says `satisfied` and `trusted` (every
benchmark shape within `roofline_done` of its attainable time; `short` names the shapes that are
not, `roofline_shapes` gives each one's fraction and bound) or when told; `roofline_provisional`
instead means the GPU has no launch floor yet (`calibrate` measures it). Never edit references/
to make a kernel pass. `audit` a new reference before optimising against it (`weak` names each
trick that would pass it). When a `ktui watch` runs the kernels on save, `verdict` gives the
finished verdict of what you just saved without running it again (it says when nothing will run
it); `output` shows what the kernel printed; `context_search` finds the DSLs'
own sources before you guess an API. On the CPU tier `passed` means correct in Triton's
interpreter, untimed, and a CuTeDSL or TileLang kernel is only `compiled`."""

# Arguments are bounded where they are read, so a huge one is refused at once with its reason.
PathArg = Annotated[str, Field(max_length=MAX_PATH_CHARS)]
KernelArg = Annotated[str, Field(max_length=MAX_PATH_CHARS, description="kernel path (kernels/x.py) or id (x)")]
MAX_PATHS = 1000

# What of a stored summary the history answers with.
_HISTORY_SUMMARY = ("correct", "speedup", "speedup_ci", "roofline_shapes", "roofline_worst", "satisfied", "short",
                    "roofline_provisional", "roofline_done", "label", "vs_previous", "vs_best", "first_failure",
                    "unchecked", "no_signal", "weak_test")


def build_server(workspace: AgentWorkspace, runs: RunService, timeouts: dict[str, float] | None = None,
                 ) -> tuple[MCPServer, Callable[[], None]]:
    """The server and what stops everything it started (its own worker, tool calls' children);
    ``runs``: where its runs happen (the workspace's daemon, or its own ``--gpus``, ``--remote``)."""
    server = KtuiMcp("ktui", instructions=INSTRUCTIONS, version=__version__, root=workspace.root)
    placement = runs.placement
    calls = ChildCalls()
    timeouts = dict(timeouts or {})

    def kernel_state(name: str):
        kernel = workspace.kernel(name)
        return kernel, state_dir(kernel.root)

    @server.tool(description="Run the loop on kernel files or folders (relative to the workspace) and wait for the "
                             "verdicts. Per kernel: verdict, summary (`trusted`: whether the pass can be trusted), "
                             "first failure with file:line and source excerpt, run_dir. Reports progress per rung; "
                             "cancelling kills the worker. Runs where the server "
                             "was started to run them (its --gpus or --remote), or on the workspace owner's worker.")
    async def run(
        paths: Annotated[list[PathArg], Field(min_length=1, max_length=MAX_PATHS,
                                              description="kernel files or folders, e.g. ['kernels/add_triton.py']")],
        ctx: Context,
        strict: Annotated[bool, Field(description="fresh process, more seeds per shape, every timed output re-checked")] = False,
        no_bench: Annotated[bool, Field(description="skip the benchmark rungs")] = False,
        seed: Annotated[int | None, Field(description="base seed (default: fresh seeds every run)")] = None,
        fresh_shapes: Annotated[int, Field(ge=0, le=16, description="shapes derived from TESTS that each version was "
                                           "never shown, checked after the declared ones (0 turns it off)")] = 2,
        audit: Annotated[bool, Field(description="after the verdicts, audit each reference version never audited "
                                     "(fast checks, cached), in the background: a later call reads a pass's "
                                     "`trusted` settled from \"pending\" (with `strict`, waited for: a weak "
                                     "one's kernels get `weak_test` in their summary)")] = True,
        reference: Annotated[PathArg | None, Field(description="judge every kernel against this reference (a "
                                                   "KernelBench problem, any reference file in the workspace)")] = None,
    ) -> dict[str, Any]:
        named = workspace.inside(reference) if reference is not None else None
        try:
            kernels = discover([workspace.inside(p) for p in paths], reference=named)
        except ProblemError as exc:
            raise BadCall(str(exc)) from None
        for kernel in kernels:
            workspace.inside(str(kernel.path))
        options = Options(arch=placement.arch, force_cpu=placement.cpu, benchmark=not no_bench, seed=seed,
                          fresh_shapes=fresh_shapes, timeouts=timeouts, strict=strict,
                          allow_network=runs.allow_network)

        async def progress(done: float, total: float | None, message: str) -> None:
            await ctx.report_progress(done, total, message)

        results = await runs.run(kernels, options, progress)
        order = {str(k.path): i for i, k in enumerate(kernels)}  # as asked, not as they finished
        results.sort(key=lambda r: order.get(str(r.get("path")), len(order)))
        if not audit:
            audits = []
        elif strict:  # the final word: the audit waited for
            audits = await anyio.to_thread.run_sync(audit_after_run, workspace.root, kernels, options, results)
        else:  # the answer comes at the verdicts; the audit goes on where it outlives the call
            audits = await anyio.to_thread.run_sync(
                audit_later, lambda: runs.hand_audits(kernels, options, named), kernels, results)
        passed = bool(results) and all(r["verdict"] == PASSED for r in results)
        answer = {"kernels": results, "all_passed": passed,
                  "all_trusted": passed and all((r.get("summary") or {}).get("trusted") is True for r in results)}
        if audits:  # a weak test is a notice: it never changes all_passed
            answer["audits"] = audits
        compiled = [r["kernel"] for r in results if r["verdict"] == "compiled"]
        if compiled:  # compiled and dumped, never run (CuTeDSL on the CPU tier): not a pass
            answer["compiled"] = compiled
            answer["not_run"] = "compiled kernels were not run: their correctness needs a GPU"
        return answer

    @server.tool(description="The newest verdict of a kernel (from .ktui/latest/<kernel>.json) with every rung's "
                             "status, and whether it is for the file's current content.")
    def latest(kernel: KernelArg) -> dict[str, Any]:
        k, state = kernel_state(kernel)
        path = latest_path(state, k.id)
        if not path.is_file():
            raise BadCall(_no_verdict(state, k, workspace.relative(k.path)))
        report = json.loads(path.read_text(encoding="utf-8"))
        out = run_digest(report, with_rungs=True, state=state)
        out["stale"] = not report_is_current(report, k)  # the kernel or its reference changed since
        return out

    @server.tool(description="The finished verdict of the kernel's content now on disk, judged by its reference now "
                             "on disk, in one call: at once from the history when it holds that run; while a watch or "
                             "ktui serve owning the workspace has a run of it queued or running (you just saved it), "
                             "after that run, waiting up to timeout_s; when nothing will run it, at once, saying so "
                             "(then call run). Never runs anything itself.")
    async def verdict(
        kernel: KernelArg,
        timeout_s: Annotated[float, Field(gt=0, le=600, description="the longest to wait for a run in flight")] = 120.0,
    ) -> dict[str, Any]:
        k, state = kernel_state(kernel)
        shown = workspace.relative(k.path)
        return await verdict_now(lambda: workspace.kernel(str(k.path)), state, shown, timeout_s)

    @server.tool(description="Stored versions of a kernel, newest first: verdict, speedup, roofline, first failure.")
    def history(
        kernel: KernelArg,
        limit: Annotated[int, Field(ge=1, le=200)] = 10,
    ) -> dict[str, Any]:
        k, state = kernel_state(kernel)
        store = Store.of(state)
        try:
            runs_ = store.runs(k.id, limit=limit)
        finally:
            store.close()
        return {"kernel": k.id, "runs": [
            {"version": r.version, "verdict": r.verdict, "message": r.message, "started": r.started,
             "duration_s": r.duration_s, "tier": r.tier, "device": r.device, "strict": r.strict, "run_dir": r.run_dir,
             "summary": trust_now(state, r.verdict, {key: r.summary[key] for key in _HISTORY_SUMMARY
                                                     if key in r.summary}, r.reference_hash)}
            for r in runs_]}

    @server.tool(description="SASS diff of a kernel version against an earlier one: instruction count, registers, "
                             "spills, per-opcode deltas, and the normalised unified diff (as `ktui diff --json`), the per-line SASS figures "
                             "of both versions side by side (`lines`), and both versions' per-shape roofline figures.")
    def diff(
        kernel: KernelArg,
        base: Annotated[str, Field(max_length=32, description="previous | best | pinned | a version number")] = "previous",
        version: Annotated[int | None, Field(ge=1, description="default: the file's current version")] = None,
    ) -> dict[str, Any]:

        k, state = kernel_state(kernel)
        store = Store.of(state)
        try:
            rerun = f"call run with paths=['{workspace.relative(k.path)}'] to see the new code"
            new, note = (version, "") if version is not None else current_version(store, k, rerun)
            if new is None:
                raise BadCall(f"{k.id} has no stored versions yet: call run first")
            old = resolve_base(store, k.id, new, base)
            result = diff_versions(state, k.id, old, new)
            lines = linediff.compare_versions(state, k.id, old, new)
            roofline = rooflines.comparison(rooflines.version_summary(store, k.id, old),
                                            rooflines.version_summary(store, k.id, new))
        except DiffError as exc:
            raise BadCall(exc.for_agents()) from None
        finally:
            store.close()
        return {**result.to_json(), "base": base, "note": note, "roofline": roofline, "lines": lines}

    async def child(verb: str, kernel: Kernel, flags: list[str], ctx: Context) -> ChildResult:
        async def progress(done: float, message: str) -> None:
            await ctx.report_progress(done, None, message)

        try:
            return await calls.call(verb, kernel, flags, progress)
        except OSError as exc:
            raise BadCall(f"could not start ktui {verb}: {exc}") from None

    @server.tool(description="Nsight Compute profile of one benchmark shape (GPU only), as `ktui profile --json`. "
                             "Reports progress; cancelling kills ncu and the kernel's process.")
    async def profile(
        kernel: KernelArg,
        ctx: Context,
        shape: Annotated[int, Field(ge=0, description="index into the reference's BENCHMARKS")] = 0,
        timeout_s: Annotated[float, Field(gt=0, le=3600)] = 600.0,
    ) -> dict[str, Any]:
        k = workspace.kernel(kernel)
        result = await child("profile", k, ["--shape", str(shape), "--timeout", str(timeout_s)], ctx)
        finished = result.final
        if finished is None:
            raise BadCall(result.describe_missing("ktui profile"))
        if not finished.get("ok"):
            raise BadCall(str(finished.get("message", "ktui profile failed")))
        return {"kernel": k.id, "summary": finished.get("summary")}

    @server.tool(description="Run the first test shape under compute-sanitizer (GPU only), as `ktui sanitize --json`. "
                             "Cancelling kills compute-sanitizer and the kernel's process.")
    async def sanitize(
        kernel: KernelArg,
        ctx: Context,
        tool: Literal["memcheck", "racecheck", "initcheck", "synccheck"] = "memcheck",
        timeout_s: Annotated[float, Field(gt=0, le=3600)] = 600.0,
    ) -> dict[str, Any]:
        k = workspace.kernel(kernel)
        result = await child("sanitize", k, ["--tool", tool, "--timeout", str(timeout_s)], ctx)
        finished = result.final
        if finished is None:
            raise BadCall(result.describe_missing("ktui sanitize"))
        if finished.get("report") is None:
            raise BadCall(str(finished.get("message", "ktui sanitize failed")))
        return {"ok": bool(finished.get("ok")), "report": finished["report"]}

    @server.tool(description="Ranked full-text search of the workspace's context/ (Triton, CuTeDSL, PTX docs and "
                             "sources): path:line and a snippet per match.")
    def context_search(
        query: Annotated[str, Field(min_length=1, max_length=1000)],
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
    ) -> dict[str, Any]:

        folder = workspace.root / "context"
        if not sources_in(folder):
            raise BadCall(no_match_hint(folder, query))
        hits, _ = search(folder, query, limit=limit)
        answer = {"query": query, "hits": [{**h.to_json(), "file": f"context/{h.path}"} for h in hits],
                  "sources": sources_in(folder)}
        return answer if hits else {**answer, "hint": no_match_hint(folder, query)}

    @server.tool(description="One compiler output of a stored version (ptx, sass, ttir, ttgir, llir, mlir, the source "
                             "that ran, resources, the report), or its error maps (error_map: where each wrong output "
                             "is wrong, drawn as text, the grids in `maps`), a page at a time: continue from next_offset.")
    def dump(
        kernel: KernelArg,
        kind: Literal[tuple(KINDS)] = "sass",  # type: ignore[valid-type]
        version: Annotated[int | None, Field(ge=1, description="default: the file's current version")] = None,
        function: Annotated[str | None, Field(max_length=1000, description="GPU function name (default: the first)")] = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        max_chars: Annotated[int, Field(ge=1, le=MAX_PAGE_CHARS)] = DEFAULT_PAGE_CHARS,
    ) -> dict[str, Any]:

        kernel_id, version, folder = stored_folder(kernel, version)
        return {"kernel": kernel_id, "version": version, **read_dump(folder, kind, function, offset, max_chars)}

    @server.tool(description="The kernel's hot lines, as file:line with the line's text: static figures of every run "
                             "(SASS instructions per line by class: global/shared loads and stores, tensor-core MMA, "
                             "FMA, branches, spills) and, once `profile` ran on that version, measured ones (Nsight "
                             "Compute samples per line, main stall reasons and a reading such as 'waiting on global "
                             "memory').")
    def hotspots(
        kernel: Annotated[str, Field(description="kernel path (kernels/x.py) or id (x)")],
        version: Annotated[int | None, Field(ge=1, description="default: the file's current version")] = None,
        top: Annotated[int, Field(ge=1, le=200, description="lines per function, hottest first")] = 10,
    ) -> dict[str, Any]:

        kernel_id, version, folder = stored_folder(kernel, version)
        return {"kernel": kernel_id, "version": version, **read_hotspots(folder, top)}

    def stored_folder(kernel: str, version: int | None) -> tuple[str, int, Path]:
        return stored.stored_folder(workspace, kernel, version)

    add_tools(server, workspace, placement)
    add_workspace_tools(server, workspace, calls)
    add_prompts(server)
    declare(server)
    _forbid_unknown_arguments(server)

    def close() -> None:
        calls.close()
        runs.close()

    return server, close


def _no_verdict(state: Path, kernel: Kernel, shown: str) -> str:
    """Why ``latest`` has no verdict, as the history tells it: no run yet, or none that finished."""
    store = Store.of(state)
    try:
        newest = store.latest_run(kernel.id)
    finally:
        store.close()
    call = f"call run with paths=['{shown}']"
    if newest is None:
        return f"{kernel.id}: no runs recorded yet; {call}"
    return (f"{kernel.id}: no finished verdict yet: its newest run, v{newest.version}, ended {newest.verdict} "
            f"(history lists it); {call}")


def _forbid_unknown_arguments(server: MCPServer) -> None:
    """An argument a tool does not take (``remote``, a typo) is an error, not silently ignored."""
    for tool in server._tool_manager.list_tools():
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters["additionalProperties"] = False


def serve(path: Path, runs: RunService, timeouts: dict[str, float] | None = None) -> int:
    """``ktui mcp``: serve until the client closes stdin (or SIGTERM); its own worker and the tools'
    children never outlive it (the workspace's daemon does, for the next caller)."""
    workspace = AgentWorkspace.at(path)
    server, close = build_server(workspace, runs, timeouts)

    def stop(signum, frame) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        server.run("stdio")
    finally:
        close()
    return 0

