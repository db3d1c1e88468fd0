"""ktui's human output passes through ``visible``: a file name or a kernel's output holding escape
sequences is shown, not obeyed, in every line a command prints. JSON output (``--json``) and the
streams the dashboard and the MCP server own are left as they are."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ktui.protocol.visible import visible

RAW_COMMANDS = ("watch", "mcp")  # the dashboard draws its own escapes; MCP speaks JSON-RPC on stdout


class VisibleStream:
    """A text stream writing ``visible(text)`` to the one it wraps; everything else is that stream's."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(visible(text))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def shown_before_parsing() -> None:
    """stderr made visible before the arguments are read: argparse's errors quote them."""
    if not isinstance(sys.stderr, VisibleStream):
        sys.stderr = VisibleStream(sys.stderr)


def shown_for(args: argparse.Namespace) -> None:
    """stdout made visible unless it carries JSON; both left raw for the dashboard and MCP."""
    if args.command in RAW_COMMANDS:
        if isinstance(sys.stderr, VisibleStream):
            sys.stderr = sys.stderr.stream
        return
    if not getattr(args, "json", False) and not isinstance(sys.stdout, VisibleStream):
        sys.stdout = VisibleStream(sys.stdout)
