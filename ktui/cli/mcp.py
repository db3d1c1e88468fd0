"""``ktui mcp``: serve ktui's runs and tools to coding agents over MCP (stdio); needs the [mcp] extra."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN
from ktui.cli.options import (
    add_daemon_flag,
    add_gpus_flag,
    add_network_flag,
    add_ray_flag,
    add_remote_flags,
    add_target_flags,
    add_timeout_flag,
    daemon_wanted,
    one_folder,
    parse_timeouts,
    placement_of,
)


def add_parser(subparsers) -> None:
    mcp = subparsers.add_parser("mcp", help=COMMANDS["mcp"])
    mcp.add_argument("dir", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    add_target_flags(mcp)
    add_network_flag(mcp)
    add_timeout_flag(mcp)
    add_gpus_flag(mcp)
    add_ray_flag(mcp)
    add_remote_flags(mcp)
    add_daemon_flag(mcp)
    mcp.set_defaults(handler=cmd_mcp, session=True)  # a long-lived worker: it may keep compile-ahead helpers


def cmd_mcp(args: argparse.Namespace) -> int:
    from ktui.workspace.kernels import ProblemError  # deferred for start-up speed

    try:
        from ktui.agents.server import serve
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith("mcp"):
            raise
        print("ktui: `ktui mcp` needs the MCP SDK: python3 -m pip install -e '.[mcp]' (or pip install 'mcp>=2.3')",
              file=sys.stderr)
        return EXIT_CANNOT_RUN
    from ktui.agents.runs import SERVER, RunService
    from ktui.dispatch.runs import QueueRuns, open_runs
    from ktui.workspace.kernels import find_root

    own = None
    try:
        one_folder(args)  # `ktui mcp --ray ws`: the folder is the workspace
        timeouts = parse_timeouts(args.timeout)
        placement = placement_of(args)  # the one choice of where runs happen
        root = find_root(args.dir, fallback=args.dir)
        daemon = daemon_wanted(args)
        source = getattr(args, "runners", None)
        if not placement.this_host:  # a Ray pool or a remote link: made now (a local worker with the first run)
            runs = open_runs(root, placement, daemon=False, session=True, source=source, who=SERVER)
            own = runs if isinstance(runs, QueueRuns) else None
        return serve(args.dir, RunService(root, placement, daemon=daemon, source=source, runs=own,
                                                allow_network=args.allow_network), timeouts)
    except (ProblemError, argparse.ArgumentTypeError, ValueError, OSError) as exc:
        if own is not None:
            own.close("cancelled: the MCP server stopped", others=False)
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
