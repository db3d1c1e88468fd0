"""``ktui pin``: pin a version of a kernel as its diff baseline, or clear the pin."""

from __future__ import annotations

import argparse
import sys

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.history import run_hint, stored_kernel
from ktui.cli.options import add_kernel_path, add_reference


def add_parser(subparsers) -> None:
    pin = subparsers.add_parser("pin", help=COMMANDS["pin"])
    add_kernel_path(pin)
    add_reference(pin)
    pin.add_argument("version", type=int, nargs="?", default=None, help="default: the file's current version")
    pin.add_argument("--clear", action="store_true", help="remove the pinned baseline")
    pin.set_defaults(handler=cmd_pin)


def cmd_pin(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir
    from ktui.workspace.versions import current_version

    kernel = stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    store = Store.of(state_dir(kernel.root))
    try:
        if args.clear:
            store.unpin(kernel.id)
            print(f"{kernel.id}: no pinned baseline")
            return EXIT_OK
        version = args.version if args.version is not None else current_version(store, kernel)[0]
        known = [v for v, _ in store.iter_versions(kernel.id)]
        if version is None or version not in known:
            what = f"no version {version}" if version is not None else "no stored versions"
            print(f"ktui: {kernel.id} has {what}: run `{run_hint(args)}` first", file=sys.stderr)
            return EXIT_FAILED
        store.pin(kernel.id, version)
        print(f"{kernel.id}: v{version} pinned as the diff baseline")
        return EXIT_OK
    finally:
        store.close()
