"""The ``audit`` and ``output`` tools, and the resources that name a run's dump files.

Declared apart from the loop's own tools (``server``) and added to the same server by
``add_tools``: ``audit`` asks whether a reference's test is worth passing, ``output`` reads what
the kernel printed, and ``ktui://runs/<kernel>/<version>/<file>`` serves each file of a stored
version's run folder (PTX, SASS, the IRs, the report, the printed output) to clients that read
resources rather than call tools.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from pydantic import Field

from ktui.agents.answers import relative
from ktui.agents.audits import AuditService
from ktui.agents.dumps import DEFAULT_PAGE_CHARS, KINDS, MAX_PAGE_CHARS
from ktui.agents.printed import read_output
from ktui.agents.stored import stored_folder
from ktui.agents.workspace import MAX_PATH_CHARS, AgentWorkspace, BadCall
from ktui.dispatch.auditor import STRONG, AuditOptions, find_targets, kernel_target
from ktui.dispatch.placement import Placement
from ktui.protocol.statedir import OUTPUT_FILE
from ktui.workspace.kernels import ProblemError

MAX_RESOURCE_CHARS = 2_000_000  # a resource is read whole: the dump tool pages through bigger files
# The files of a run folder a resource serves: the dumps' patterns and the printed output.
RESOURCE_PATTERNS = (*KINDS.values(), OUTPUT_FILE)


def add_tools(server: MCPServer, workspace: AgentWorkspace, placement: Placement) -> None:
    audits = AuditService()

    @server.tool(description="Audit a reference's test, as `ktui audit`: trivial kernels (zeros, a copy of an input, "
                             "one constant, the answer in lower precision) judged exactly as a kernel is, and the "
                             "reference itself (moved by its seed and by every input, inputs not all zeros). "
                             "Answers strong, or weak with each weakness named. Name a reference, a kernel (its "
                             "reference is audited) or a folder. Cached per reference version in .ktui/audits/.")
    async def audit(
        path: Annotated[str, Field(max_length=MAX_PATH_CHARS, description="references/<op>.py, a kernel (path or "
                                                                          "id), or a folder such as '.'")],
        ctx: Context,
        fast: Annotated[bool, Field(description="only the fast checks (zeros, a copy, a constant, the reference's "
                                                "own), as `ktui run` does after its verdicts")] = False,
        fresh: Annotated[bool, Field(description="audit again even if a cached verdict exists")] = False,
        seed: Annotated[int | None, Field(description="base seed (default: fresh seeds)")] = None,
        shapes: Annotated[int | None, Field(ge=1, description="only the first N test shapes")] = None,
    ) -> dict[str, Any]:
        try:
            found = workspace.inside(path)
            targets = find_targets([found]) if found.exists() else [kernel_target(workspace.kernel(path))]
        except ProblemError as exc:
            raise BadCall(str(exc)) from None
        options = AuditOptions(arch=placement.arch, force_cpu=placement.cpu, seed=seed, shapes=shapes, fresh=fresh,
                               fast=fast)

        async def progress(done: float, message: str) -> None:
            await ctx.report_progress(done, None, message)

        results = await audits.audit(targets, options, progress)
        return {"references": results, "all_strong": bool(results) and all(r["verdict"] == STRONG for r in results)}

    @server.tool(description="What the kernel printed (its stdout and stderr) in a stored version's newest run, a "
                             "page at a time: continue from next_offset. Kept in .ktui/runs/<kernel>/<version>/"
                             "output.txt, at most 5000 lines and 1,000,000 characters per run.")
    def output(
        kernel: Annotated[str, Field(max_length=MAX_PATH_CHARS, description="kernel path (kernels/x.py) or id (x)")],
        version: Annotated[int | None, Field(ge=1, description="default: the file's current version")] = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        max_chars: Annotated[int, Field(ge=1, le=MAX_PAGE_CHARS)] = DEFAULT_PAGE_CHARS,
    ) -> dict[str, Any]:
        kernel_id, version, folder = stored_folder(workspace, kernel, version)
        return {"kernel": kernel_id, "version": version, **read_output(folder, offset, max_chars)}

    @server.resource("ktui://runs/{kernel}/{version}/{file}", mime_type="text/plain",
                     description="One file of a stored version's run folder: <function>.ptx, .sass, .ttir, .ttgir, "
                                 ".llir, .mlir, source.py, resources.json, report.json, hotspots.txt, output.txt. "
                                 "`dump` lists a version's functions.")
    def run_file(kernel: str, version: str, file: str) -> str:
        if not version.isdigit():
            raise ResourceNotFoundError(f"ktui://runs/{kernel}/{version}/{file}: {version!r} is not a version number")
        try:
            _, _, folder = stored_folder(workspace, kernel, int(version))
        except BadCall as exc:  # a resource's error is the SDK's resource error, answered at once
            raise ResourceNotFoundError(f"ktui://runs/{kernel}/{version}/{file}: {relative(str(exc), workspace.root)}") from None
        path = folder / file
        if "/" in file or not any(path.match(p) for p in RESOURCE_PATTERNS) or not path.is_file():
            served = sorted(p.name for pattern in RESOURCE_PATTERNS for p in folder.glob(pattern))
            raise ResourceNotFoundError(f"{file!r} is not a file of {kernel} v{version}: it has "
                                        f"{', '.join(served) or 'none (no run of that version)'}")
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_RESOURCE_CHARS:
            return text[:MAX_RESOURCE_CHARS] + f"\n… (cut at {MAX_RESOURCE_CHARS} characters: page with `dump`)"
        return text
