"""``ktui diff``: the SASS diff of a kernel's version against an earlier one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.history import run_hint, stored_kernel
from ktui.cli.options import add_reference


def add_parser(subparsers) -> None:
    diff = subparsers.add_parser("diff", help="SASS diff of a kernel's version against an earlier one")
    diff.add_argument("path", type=Path)
    add_reference(diff)
    diff.add_argument("--base", default="previous", metavar="previous|best|pinned|N",
                      help="what to compare with: the latest earlier passing version (default), the fastest "
                           "passing version, the pinned baseline, or a version number")
    diff.add_argument("--version", type=int, default=None,
                      help="the version to inspect (default: the file's current content, else the newest run)")
    diff.add_argument("--json", action="store_true", help="one JSON object for agents")
    diff.add_argument("--context", type=int, default=3, help="lines of context in the unified diff")
    diff.add_argument("--no-unified", action="store_true", help="only the opcode and resource deltas")
    diff.set_defaults(handler=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.history.sassdiff import DiffError, diff_versions, resolve_base
    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir
    from ktui.workspace.versions import current_version

    kernel = stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    state = state_dir(kernel.root)
    store = Store.of(state)
    try:
        new, note = (args.version, "") if args.version is not None else current_version(store, kernel)
        if new is None:
            raise DiffError(f"{kernel.id} has no stored versions yet: run `{run_hint(args)}` first")
        base = resolve_base(store, kernel.id, new, args.base)
        diff = diff_versions(state, kernel.id, base, new, context=max(0, args.context))
    except DiffError as exc:
        if args.json:
            print(json.dumps({"kernel": kernel.id, "base": args.base, "error": str(exc)}))
        else:
            print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    if args.json:
        print(json.dumps({**diff.to_json(), "base": args.base, "note": note}))
        return EXIT_OK
    if note:
        print(f"note: {note}", file=sys.stderr)
    print(diff.text(unified=not args.no_unified))
    return EXIT_OK
