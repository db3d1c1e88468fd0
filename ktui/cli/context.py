"""``ktui context``: the material for agents in context/, ``add`` a source or ``search`` it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ktui.agentdocs.sources import NETWORK, offline_sources
from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.options import add_step_timeout


def add_parser(subparsers) -> None:
    ctx = subparsers.add_parser("context", help=COMMANDS["context"])
    ctx_sub = ctx.add_subparsers(dest="context_command", required=True)
    offline, network = list(offline_sources()), list(NETWORK)  # one offline source per DSL (ktui.protocol.dsls)
    add = ctx_sub.add_parser("add", help=f"add a source: {', '.join(offline)} (offline); {', '.join(network)} (network)")
    add.add_argument("source", help=f"the source to add: {', '.join([*offline, *network][:-1])} or {network[-1]}")
    add.add_argument("--url", default=None, help="fetch from here instead (a git URL, or the PTX page's URL / file)")
    add_step_timeout(add, "each network step", None, "60 for a page, 300 for a git clone")
    add.add_argument("--dir", type=Path, default=None, help="the context folder (default: <workspace>/context)")
    search = ctx_sub.add_parser("search", help="ranked full-text search: prints path:line and a snippet")
    search.add_argument("query", nargs="+", help="the words to search for")
    search.add_argument("--json", action="store_true", help="one JSON object per match")
    search.add_argument("--limit", type=int, default=20, help="print at most this many matches (default 20)")
    search.add_argument("--dir", type=Path, default=None, help="the context folder (default: <workspace>/context)")
    ctx.set_defaults(handler=cmd_context)


def context_dir(given: Path | None) -> Path:
    """``--dir``, else ``context/`` of the workspace around the current folder (or of the current folder)."""
    from ktui.workspace.kernels import find_root  # deferred for start-up speed

    if given is not None:
        return given
    cwd = Path.cwd()
    return find_root(cwd, fallback=cwd) / "context"


def cmd_context(args: argparse.Namespace) -> int:
    folder = context_dir(args.dir)
    if args.context_command == "add":
        from ktui.agentdocs.sources import ContextError, add_source  # deferred for start-up speed

        try:
            added = add_source(args.source, folder, url=args.url, timeout=args.timeout)
        except ContextError as exc:
            print(f"ktui: {exc}", file=sys.stderr)
            return EXIT_CANNOT_RUN
        print(f"{os.path.relpath(added.folder)}: {added.files} files, {added.bytes / 2**20:.1f} MiB · {added.version}")
        for note in added.notes:
            print(f"  {note}")
        return EXIT_OK

    from ktui.agentdocs.index import search  # deferred for start-up speed

    if not folder.is_dir():
        first, *others = [*offline_sources(), *NETWORK]
        print(f"ktui: {folder} does not exist: fill it with `ktui context add {first}` (or {', '.join(others)})",
              file=sys.stderr)
        return EXIT_CANNOT_RUN
    hits, _ = search(folder, " ".join(args.query), limit=args.limit)
    for hit in hits:
        if args.json:
            record = hit.to_json()
            record["file"] = str(folder / hit.path)
            print(json.dumps(record))
        else:
            print(f"{os.path.relpath(folder / hit.path)}:{hit.line}: {hit.snippet}")
    if not hits:
        from ktui.agentdocs.sources import no_match_hint  # deferred for start-up speed

        print(f"ktui: {no_match_hint(Path(os.path.relpath(folder)), ' '.join(args.query))}", file=sys.stderr)
    return EXIT_OK if hits else EXIT_FAILED
