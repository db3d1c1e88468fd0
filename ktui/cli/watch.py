"""``ktui watch``: re-run the loop on every save, in the dashboard or headless as JSON lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN
from ktui.cli.options import (
    add_daemon_flag,
    add_gpus_flag,
    add_loop_flags,
    add_ray_flag,
    add_remote_flags,
    add_state_dir,
    daemon_wanted,
    loop_options,
    one_folder,
    placement_of,
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
    add_daemon_flag(watch)
    watch.set_defaults(handler=cmd_watch, session=True)  # a long-lived worker: it may keep compile-ahead helpers


def cmd_watch(args: argparse.Namespace) -> int:
    # deferred for start-up speed (the watch loop brings watchdog)
    from ktui.dispatch.placement import place
    from ktui.watch.loop import WatchLoop, WatchSettings
    from ktui.workspace.folder import Workspace
    from ktui.workspace.kernels import ProblemError

    try:
        one_folder(args)  # `ktui watch --ray kernels/`: the folder is the one to watch
        workspace = Workspace.at(args.dir)
        options = loop_options(args)
        placement = placement_of(args)
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.debounce_ms < 0:
        print("ktui: --debounce-ms must be 0 or more", file=sys.stderr)
        return EXIT_CANNOT_RUN
    settings = WatchSettings(debounce_s=args.debounce_ms / 1000.0, force_polling=args.poll, catch_up=not args.lazy,
                             audit=not args.no_audit, owner=placement)
    if not args.headless:
        from ktui.history.store import Store  # deferred for start-up speed
        from ktui.workspace.kernels import state_dir

        store = Store.of(state_dir(workspace.root))
        try:
            store.must_write()  # said here, in one line, before the dashboard takes the screen
        finally:
            store.close()
    link, refused = _daemon(args, workspace.root, placement)
    if refused:
        print(f"ktui: {refused}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    placed = None
    try:
        if link is None:
            placed = place(placement, root=workspace.root, session=True, source=getattr(args, "runners", None))
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    runners = placed.runners if placed is not None else None
    try:
        if args.headless:
            from ktui.watch import headless  # deferred for start-up speed

            printer = headless.JsonLines(with_output=args.verbose)
            if link is not None:
                from ktui.watch.view import WatchView

                return headless.run(WatchView(link, workspace, options, printer, settings), printer)
            return headless.run(WatchLoop(workspace, options, printer, settings, runners=runners), printer)
        from ktui.tui.app import run_dashboard  # deferred: Textual loads only for the dashboard

        return run_dashboard(workspace, options, settings, runners=runners, link=link)
    finally:
        if placed is not None:
            placed.close()  # a Ray pool's actors, and Ray when it started it


def _daemon(args: argparse.Namespace, root: Path, placement):
    """The workspace's daemon to view (started if need be), or None for a watch of this process's
    own; and why this watch may not start at all ("" when it may): another process owns the
    workspace and hosts no views, so a watch of its own would run every save a second time."""
    from ktui.dispatch.daemon import reach  # deferred for start-up speed
    from ktui.dispatch.owner import OwnerGone, OwnerLink, Refused
    from ktui.workspace.kernels import state_dir

    state = state_dir(root)
    link = None
    if daemon_wanted(args) and placement.this_host and getattr(args, "runners", None) is None:
        try:
            found = reach(root, state, placement)
        except OSError:
            found = None  # a workspace whose state cannot be written: a watch of its own
        if found is not None and found.note:
            print(f"ktui: {found.note}", file=sys.stderr, flush=True)
        link = found.link if found is not None else None
    else:
        link = OwnerLink.connect(state)
    if link is None:
        return None, ""
    try:
        status = link.status()
    except (OwnerGone, Refused):
        return None, ""  # gone meanwhile: this watch owns the workspace
    if status.serves_views:
        return link, ""
    return None, (f"the workspace is owned by pid {status.pid} (a ktui command run with --no-daemon): a watch of its "
                  "own would run every save a second time; wait for it to end, or run the daemon (ktui serve)")
