"""``ktui init``: create a workspace (kernels/, references/, context/, AGENTS.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK


def add_parser(subparsers) -> None:
    init = subparsers.add_parser("init", help=COMMANDS["init"])
    init.add_argument("dir", nargs="?", type=Path, default=Path("."), help="the workspace to create (default: here)")
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")
    init.add_argument("--no-context", action="store_true",
                      help="leave context/ empty (by default it gets each installed DSL's own sources and docs "
                           "(Triton, CuTeDSL, TileLang…), offline)")
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
    if not args.no_context:
        fill_context(result.root / "context")
    ktui_on_path_or_advice()
    where = os.path.relpath(result.root)
    print(f"workspace ready in {where}. Next: cd {where} && ktui run kernels/   (agents: read AGENTS.md)")
    return EXIT_OK


def ktui_on_path_or_advice() -> None:
    """.mcp.json names ``ktui`` (portable, committed): say what to do where it is not on PATH."""
    import shutil

    if shutil.which("ktui") is not None:
        return
    here = Path(sys.executable).parent
    print(f"  note: `ktui` is not on PATH, and .mcp.json (Claude Code) starts `ktui mcp .`: put {here} on PATH, "
          f"or register this environment's server for yourself with `claude mcp add ktui -- {sys.executable} "
          "-m ktui mcp .` (.codex/config.toml and .cursor/mcp.json already name this interpreter)")


def fill_context(folder: Path) -> None:
    """context/ filled from what is installed here, offline: an agent's search finds something from
    the start. A source that fails is said and skipped: init itself has succeeded."""
    from ktui.agentdocs.sources import (
        NETWORK_ADVICE,
        ContextError,
        add_source,
        installed_offline_sources,
        offline_sources,
    )

    installed = installed_offline_sources()
    for source, package in offline_sources().items():
        if source not in installed:
            print(f"  context/{source}: its package ({package}) is not installed here; "
                  f"`ktui context add {source}` once it is")
            continue
        try:
            added = add_source(source, folder)
        except (ContextError, OSError) as exc:
            print(f"  context/{source}: not added ({exc})")
            continue
        print(f"  context/{source}: {added.files} files, {added.bytes / 2**20:.1f} MiB · {added.version}")
    print(f"  context/: add more with {NETWORK_ADVICE}")
