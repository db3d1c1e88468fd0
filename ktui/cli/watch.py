"""``ktui watch``: re-run the loop on every save, in the dashboard or headless as JSON lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN
from ktui.cli.options import (
    add_gpus_flag,
    add_loop_flags,
    add_ray_flag,
    add_remote_flags,
    add_state_dir,
    close_placement,
    loop_options,
    one_folder,
    placement,
    runner_for,
)


def add_parser(subparsers) -> None:
    watch = subparsers.add_parser("watch", help=COMMANDS["watch"])
    watch.add_argument("dir", nargs="?", type=Path, default=Path("."),
                       help="the workspace, its kernels/ folder, or a folder of kernels (default: .)")
    watch.add_argument("--headless", action="store_true", help="no UI: print the loop's events as JSON lines")
    add_loop_flags(watch)
    watch.add_argument("--debounce-ms", type=float, default=150.0,
                       help="quiet time after the last file event before a save counts (default 150)")
    watch.add_argument("--poll", action="store_true", help="poll the file system instead of using inotify")
    watch.add_argument("--lazy", action="store_true",
                       help="do not run kernels at start whose stored results are stale; mark them stale")
    watch.add_argument("--no-audit", action="store_true",
                       help="do not audit each reference version in the background (the `weak test` mark)")
    watch.add_argument("--strict", action="store_true",
                       help="start in strict mode (key s toggles it): fresh process, more seeds, every timed output re-checked")
    watch.add_argument("-v", "--verbose", action="store_true", help="headless: also print what kernels printed")
    add_gpus_flag(watch)
    add_ray_flag(watch)
    add_state_dir(watch)
    add_remote_flags(watch)
    watch.set_defaults(handler=cmd_watch, session=True)  # a long-lived worker: it may keep compile-ahead helpers


def cmd_watch(args: argparse.Namespace) -> int:
    # deferred for start-up speed (the watch loop brings watchdog)
    from ktui.watch.loop import WatchLoop, WatchSettings
    from ktui.workspace.folder import Workspace
    from ktui.workspace.kernels import ProblemError

    try:
        one_folder(args)  # `ktui watch --ray kernels/`: the folder is the one to watch
        workspace = Workspace.at(args.dir)
        options = loop_options(args)
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.debounce_ms < 0:
        print("ktui: --debounce-ms must be 0 or more", file=sys.stderr)
        return EXIT_CANNOT_RUN
    settings = WatchSettings(debounce_s=args.debounce_ms / 1000.0, force_polling=args.poll, catch_up=not args.lazy,
                             audit=not args.no_audit, owner_placement=placement(args))
    if not args.headless:
        from ktui.history.store import Store  # deferred for start-up speed
        from ktui.workspace.kernels import state_dir

        store = Store.of(state_dir(workspace.root))
        try:
            store.must_write()  # said here, in one line, before the dashboard takes the screen
        finally:
            store.close()
    try:
        runner = runner_for(args, root=workspace.root)  # here, several GPUs, a remote host or Ray
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        if args.headless:
            from ktui.watch import headless  # deferred for start-up speed

            printer = headless.JsonLines(with_output=args.verbose)
            return headless.run(WatchLoop(workspace, options, printer, settings, runner=runner), printer)
        from ktui.tui.app import run_dashboard  # deferred: Textual loads only for the dashboard

        return run_dashboard(workspace, options, settings, runner=runner)
    finally:
        close_placement(args, runner)  # a Ray pool's actors, and Ray when it started it
