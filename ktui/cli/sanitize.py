"""``ktui sanitize``: a kernel's first test shape under compute-sanitizer."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.options import add_kernel_path, add_reference, add_remote_flags, add_step_timeout, tool_host_for


def add_parser(subparsers) -> None:
    san = subparsers.add_parser("sanitize", help=COMMANDS["sanitize"])
    add_kernel_path(san)
    add_reference(san)
    san.add_argument("--tool", choices=("memcheck", "racecheck", "initcheck", "synccheck"), default="memcheck",
                     help="the compute-sanitizer tool (default memcheck)")
    san.add_argument("--json", action="store_true", help="progress and result as JSON lines")
    add_step_timeout(san, "the sanitizer's run", 600.0, "600")
    add_remote_flags(san, "run the tool on HOST's GPU through the system's ssh (keys only), with the workspace "
                          "synced as for `ktui run --remote`; its reports land here, in .ktui/runs/")
    san.set_defaults(handler=cmd_sanitize)


def cmd_sanitize(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.dispatch.owner import OwnerGone, gpu_turn_for
    from ktui.profiling.external import CannotRun, ToolFailed
    from ktui.profiling.sanitize import sanitize

    def progress(message: str) -> None:
        if not args.json:
            print(f"… {message}", file=sys.stderr, flush=True)

    try:
        host = tool_host_for(args)
    except ValueError as exc:
        print(json.dumps({"ok": False, "message": str(exc), "report": None}) if args.json else f"ktui: {exc}",
              file=sys.stdout if args.json else sys.stderr)
        return EXIT_CANNOT_RUN
    # A local sanitizer run takes its turn on the workspace owner's GPU: never beside a timed run.
    turn = gpu_turn_for(args.path, f"ktui sanitize {args.path}") if args.remote is None else nullcontext()
    try:
        with turn:
            report = sanitize(args.path, tool=args.tool, timeout_s=args.timeout, progress=progress,
                              reference=args.reference, host=host)
    except (CannotRun, ToolFailed, OwnerGone) as exc:
        if args.json:
            print(json.dumps({"ok": False, "message": str(exc), "report": None}))
        else:
            print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN if isinstance(exc, CannotRun) else EXIT_FAILED
    if args.json:
        print(json.dumps({"ok": report.clean, "message": "no errors" if report.clean else
                          f"{report.error_count} error(s)", "report": report.to_json()}))
    else:
        print(report.text())
    return EXIT_OK if report.clean else EXIT_FAILED
