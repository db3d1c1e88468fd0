"""``ktui init``: create a workspace (kernels/, references/, context/, AGENTS.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK


def add_parser(subparsers) -> None:
    init = subparsers.add_parser("init", help="create a workspace: kernels/, references/, context/, AGENTS.md")
    init.add_argument("dir", nargs="?", type=Path, default=Path("."), help="the workspace to create (default: here)")
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.set_defaults(handler=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from ktui.workspace.scaffold import init_workspace  # deferred for start-up speed

    try:
        result = init_workspace(args.dir, force=args.force)
    except OSError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if result.conflicts:
        print(f"ktui: {result.root} already has {', '.join(result.conflicts)}; nothing was written "
              "(--force overwrites them)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    for rel in result.written:
        print(f"  wrote {rel}")
    print(f"  .gitignore: {result.gitignore}")
    where = os.path.relpath(result.root)
    print(f"workspace ready in {where}. Next: cd {where} && ktui run kernels/   (agents: read AGENTS.md)")
    return EXIT_OK
