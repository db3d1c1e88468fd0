"""``ktui mcp``: serve ktui's runs and tools to coding agents over MCP (stdio); needs the [mcp] extra."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN
from ktui.cli.options import (
    add_gpus_flag,
    add_network_flag,
    add_ray_flag,
    add_remote_flags,
    add_target_flags,
    add_timeout_flag,
    close_placement,
    one_folder,
    parse_timeouts,
    placement,
    runner_for,
    runners_of,
    worker_config,
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
    from ktui.agents.runs import Placement
    from ktui.workspace.kernels import find_root

    runner = None
    try:
        one_folder(args)  # `ktui mcp --ray ws`: the folder is the workspace
        timeouts = parse_timeouts(args.timeout)
        runner = runner_for(args, root=find_root(args.dir, fallback=args.dir))  # the one choice of where runs happen
        return serve(args.dir, worker_config(args), timeouts, Placement(runners_of(runner), placement(args)))
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        close_placement(args, runner)  # a Ray pool's actors, and Ray when it started it
