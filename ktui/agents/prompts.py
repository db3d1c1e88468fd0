"""The server's prompts: what a user asks an agent to do with a kernel, with the loop to follow.

``satisfy`` is the loop of ``ktui init``'s skill (``ktui.workspace.scaffold.loop_text``: one text for
Claude Code's skill, Cursor's rule, AGENTS.md and this prompt) put to work on one kernel, with its
stop rule: satisfied and trusted, or a reason to stop that the agent says.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from ktui.agents.workspace import MAX_PATH_CHARS
from ktui.workspace.scaffold import loop_text


def add_prompts(server: MCPServer) -> None:
    @server.prompt(name="satisfy", title="Make this kernel satisfied",
                   description="The loop an agent follows to make a kernel correct, trusted and fast enough "
                               "(satisfied: every benchmark shape within roofline_done of its attainable time), "
                               "with the stop rule.")
    def satisfy(kernel: Annotated[str, Field(max_length=MAX_PATH_CHARS,
                                             description="the kernel: kernels/<op>_<variant>.py, or a new one to write")]) -> str:
        return (f"Make `{kernel}` satisfied with the ktui tools, following the loop below. Call `run` with "
                f"paths=['{kernel}'] first (or `kernels` to see where it stands). Stop when its summary says "
                "`satisfied: true` and `trusted: true`; stop too, and say why, when the pass cannot be trusted "
                "(`trusted: false`: the reference's test must change, not the kernel), when `roofline_provisional` "
                "leaves no stop decision and `calibrate` cannot run here, or when five versions in a row bring no "
                "gain (`vs_best` not faster). Report the versions you tried and what each changed.\n\n" + loop_text())
