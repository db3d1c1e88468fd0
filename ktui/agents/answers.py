"""The shape of every answer the server gives, in one place: small, typed, in the agent's own terms.

``KtuiMcp`` is the SDK's server with three things done once for every tool:

- a successful answer's structured content names files relative to the workspace, and its text
  content is a few lines (``ktui.agents.headlines``) instead of the same JSON again, indented;
- arguments that do not fit a tool's schema are refused in one line that names each argument
  and what it must be (not pydantic's report with its links);
- an error a tool raised reaches the agent as its own message, paths relative to the workspace
  and the CLI's commands named as tools (``for_agents``), without the SDK's ``Error executing
  tool …:`` prefix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from ktui.agents.headlines import headline

MAX_SHOWN_VALUE = 60  # characters of a refused argument's value quoted back
# What messages shared with the CLI say of its commands, in the tools' words (errors and answers alike).
CLI_TO_TOOLS = (
    ("`ktui run` ", "`run` "),
    ("`ktui calibrate`", "the `calibrate` tool"),
    ("`ktui audit ", "the `audit` tool on `"),
    ("`ktui sanitize ", "the `sanitize` tool on `"),
    ("(or --remote HOST)", "(or a server started with --remote HOST)"),
)


class KtuiMcp(MCPServer):
    """The server of one workspace, ``root``."""

    def __init__(self, *args: Any, root: Path, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.root = Path(root)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            result = await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: its text stays in the server's log
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(argument_error(name, cause, self._arguments(name))) from cause
            raise ToolError(for_agents(str(cause) if isinstance(cause, ToolError) else str(exc), self.root)) from exc
        if not isinstance(result, CallToolResult) or result.is_error or result.structured_content is None:
            return result
        answer = for_agents(result.structured_content, self.root)
        return CallToolResult(content=[TextContent(type="text", text=headline(name, answer))],
                              structured_content=answer)

    def _arguments(self, name: str) -> list[str]:
        tool = self._tool_manager.get_tool(name)
        return list((tool.parameters.get("properties") or {}) if tool is not None else {})


def argument_error(tool: str, error: ValidationError, accepted: list[str]) -> str:
    """``run: seed must be an integer (got 'x'); remote is not an argument of run (it takes paths, strict, …)``"""
    said = []
    for item in error.errors():
        where = ".".join(str(part) for part in item.get("loc", ())) or "arguments"
        kind = item.get("type", "")
        if kind == "extra_forbidden":
            said.append(f"{where} is not an argument of {tool} (it takes {', '.join(accepted)})")
        elif kind == "missing":
            said.append(f"{where} is required")
        else:
            value = repr(item.get("input"))
            value = value if len(value) <= MAX_SHOWN_VALUE else value[: MAX_SHOWN_VALUE - 1] + "…"
            said.append(f"{where}: {_lower_first(item.get('msg', 'not valid'))} (got {value})")
    return f"{tool}: " + "; ".join(said)


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def for_agents(value: Any, root: Path) -> Any:
    """``value`` (an answer, or a message) in the tools' words: paths relative to the workspace
    ``root``, a command of the CLI named as its tool."""
    value = relative(value, root)
    if isinstance(value, str):
        for cli, tool in CLI_TO_TOOLS:
            value = value.replace(cli, tool)
        return value
    if isinstance(value, dict):
        return {k: v if k == "text" else for_agents(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [for_agents(v, root) for v in value]
    return value


def relative(value: Any, root: Path) -> Any:
    """``value`` with every path under ``root`` written relative to it; a page of text (``text``) is
    left as it is (its offsets count its characters)."""
    prefix = str(root).rstrip("/") + "/"
    if isinstance(value, str):
        return value.replace(prefix, "") if prefix in value else ("." if value == str(root) else value)
    if isinstance(value, dict):
        return {k: v if k == "text" else relative(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [relative(v, root) for v in value]
    return value
