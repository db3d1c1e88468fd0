"""The workspace at a glance and what an agent sets in it: the ``kernels`` tool (and resource),
``pin`` and ``calibrate``.

``kernels`` answers in one call what an agent would otherwise ask ``latest`` once per kernel:
each kernel's path, DSL, newest finished version and verdict, whether that is stale (the file or
its reference changed since), its best speedup, whether it is satisfied (the roofline's stop
decision) and whether its pass can be trusted. ``pin`` sets the diff baseline (``ktui pin``);
``calibrate`` measures the GPU's launch floor and ceilings again (``ktui calibrate``, in a child).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from ktui.agents.child_calls import ChildCalls
from ktui.agents.digest import trust_now
from ktui.agents.workspace import MAX_PATH_CHARS, AgentWorkspace, BadCall
from ktui.history.best import best_run
from ktui.history.current import on_disk
from ktui.history.store import RunRecord, Store
from ktui.protocol.events import finished_run
from ktui.workspace.kernels import Kernel, ProblemError, discover, state_dir
from ktui.workspace.versions import current_version

KernelArg = Annotated[str, Field(max_length=MAX_PATH_CHARS, description="kernel path (kernels/x.py) or id (x)")]
# The pre-checks' figure that names a module's kernels, per DSL.
DSL_FIGURES = {"triton_kernels": "triton", "cute_functions": "cutedsl", "tilelang_kernels": "tilelang"}
# A kernel never run: its DSL read from its imports.
_IMPORTS = {"triton": "triton", "cutlass": "cutedsl", "tilelang": "tilelang"}
_IMPORT = re.compile(r"^\s*(?:import|from)\s+(triton|cutlass|tilelang)\b", re.MULTILINE)
# What the calibrate tool answers of ``ktui calibrate --json``: the ceilings and where they are kept.
CALIBRATION_KEYS = ("device", "driver", "mig", "date", "bandwidth_gbs", "tflops", "launch_floor", "path", "note")


def add_workspace_tools(server: MCPServer, workspace: AgentWorkspace, calls: ChildCalls) -> None:
    @server.tool(description="Every kernel of the workspace at a glance: path, DSL, newest finished version and "
                             "verdict, stale (the file or its reference changed since), best speedup, satisfied "
                             "(every benchmark shape within roofline_done of its attainable time; null without a "
                             "roofline) and trusted (whether its pass can be trusted). Read-only; the same as the "
                             "resource ktui://kernels.")
    def kernels() -> dict[str, Any]:
        return {"kernels": overview(workspace)}

    @server.resource("ktui://kernels", mime_type="application/json",
                     description="The workspace's kernels at a glance, as the kernels tool answers.")
    def kernels_resource() -> str:
        return json.dumps({"kernels": overview(workspace)}, separators=(",", ":"))

    @server.tool(description="Pin a stored version of a kernel as its diff baseline (diff base='pinned'), or "
                             "clear the pin, as `ktui pin`.")
    def pin(
        kernel: KernelArg,
        version: Annotated[int | None, Field(ge=1, description="default: the file's current version")] = None,
        clear: Annotated[bool, Field(description="remove the pinned baseline instead")] = False,
    ) -> dict[str, Any]:
        k = workspace.kernel(kernel)
        store = Store.of(state_dir(k.root))
        try:
            if clear:
                store.unpin(k.id)
                return {"kernel": k.id, "pinned": None}
            chosen = version if version is not None else current_version(store, k)[0]
            known = [v for v, _ in store.iter_versions(k.id)]
            if chosen is None or chosen not in known:
                what = f"no version {chosen}" if chosen is not None else "no stored versions"
                raise BadCall(f"{k.id} has {what}: call run with paths=['{workspace.relative(k.path)}'] first"
                              + (f" (it has v{min(known)}–v{max(known)})" if known else ""))
            store.pin(k.id, chosen)
            return {"kernel": k.id, "pinned": chosen}
        finally:
            store.close()

    @server.tool(description="Measure this GPU's launch floor, copy bandwidth and matmul rates again (the "
                             "roofline's ceilings), as `ktui calibrate`: kept per user for every workspace. The first "
                             "benchmark on an uncalibrated GPU measures it by itself; call this after a driver "
                             "update or when a summary says roofline_provisional. GPU only; progress per step.")
    async def calibrate(
        ctx: Context,
        time_s: Annotated[float, Field(gt=0, le=30, description="sampling cap per measurement")] = 2.0,
    ) -> dict[str, Any]:
        async def progress(done: float, message: str) -> None:
            await ctx.report_progress(done, None, message)

        argv = [sys.executable, "-m", "ktui", "calibrate", str(workspace.root), "--time", str(time_s), "--json"]
        try:
            result = await calls.call_argv("calibrate", argv, workspace.root, progress)
        except OSError as exc:
            raise BadCall(f"could not start ktui calibrate: {exc}") from None
        if result.final is None or result.returncode != 0:
            raise BadCall(result.stderr_tail.removeprefix("ktui: ") or result.describe_missing("ktui calibrate"))
        return {key: result.final.get(key) for key in CALIBRATION_KEYS}  # not its per-measurement details


def overview(workspace: AgentWorkspace) -> list[dict[str, Any]]:
    """One entry per kernel of the workspace, in path order."""
    try:
        found = discover([workspace.root])
    except ProblemError:
        return []  # no kernels/ yet, or nothing in it
    stores: dict[Path, Store] = {}
    try:
        entries = []
        for kernel in found:
            state = state_dir(kernel.root)
            store = stores.get(state) or stores.setdefault(state, Store.of(state))
            entries.append(_entry(workspace, kernel, state, store))
        return entries
    finally:
        for store in stores.values():
            store.close()


def _entry(workspace: AgentWorkspace, kernel: Kernel, state: Path, store: Store) -> dict[str, Any]:
    runs = store.runs(kernel.id, limit=500)
    latest = next((r for r in runs if finished_run(r.verdict)), None)
    best = best_run(runs)
    entry: dict[str, Any] = {"path": workspace.relative(kernel.path), "kernel": kernel.id,
                             "dsl": _dsl(kernel, store, latest), "version": None, "verdict": None, "stale": True,
                             "best": None, "satisfied": None, "trusted": None}
    if kernel.reference is None:
        entry["problem"] = kernel.reference_error
    if latest is None:
        return entry
    summary = trust_now(state, latest.verdict, latest.summary, latest.reference_hash)
    entry.update(version=latest.version, verdict=latest.verdict,
                 stale=not on_disk(kernel, latest.content_hash, latest.reference_hash),
                 satisfied=summary.get("satisfied"), trusted=summary.get("trusted"))
    if best is not None:
        entry["best"] = {"version": best.version, "speedup": best.summary.get("speedup")}
    return entry


def _dsl(kernel: Kernel, store: Store, latest: RunRecord | None) -> str | None:
    """The DSL(s) the worker found in the newest run's pre-checks, else the ones the file imports."""
    if latest is not None:
        for rung in store.rungs(latest.run_id):
            if rung.get("rung") == "pre-checks":
                found = [dsl for key, dsl in DSL_FIGURES.items() if (rung.get("figures") or {}).get(key)]
                if found:
                    return "+".join(found)
    try:
        text = kernel.path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = sorted({_IMPORTS[m] for m in _IMPORT.findall(text)})
    return "+".join(found) or None
