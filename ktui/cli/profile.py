"""``ktui profile``: a kernel on one benchmark shape under Nsight Compute, or its Proton sections timed."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import nullcontext

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.options import add_kernel_path, add_reference, add_remote_flags, add_step_timeout, tool_host_for


def add_parser(subparsers) -> None:
    prof = subparsers.add_parser("profile", help=COMMANDS["profile"])
    add_kernel_path(prof)
    add_reference(prof)
    prof.add_argument("--json", action="store_true", help="progress and result as JSON lines")
    prof.add_argument("--set", default="basic", help="basic (default: the summary's sections) or an ncu set, e.g. full")
    prof.add_argument("--shape", type=int, default=0, help="index into the reference's BENCHMARKS (default 0)")
    prof.add_argument("--clock-control", choices=("none", "base"), default="none",
                      help="none (default): the clocks the benchmark sees; base: ncu locks base clocks")
    add_step_timeout(prof, "the profile", 600.0, "600")
    prof.add_argument("--warmup", type=int, default=2, help="unprofiled calls before the profiled one (default 2)")
    prof.add_argument("--sections", action="store_true",
                      help="time the Proton scopes (triton.profiler.language) inside a Triton kernel instead")
    add_remote_flags(prof, "run the tool on HOST's GPU through the system's ssh (keys only), with the workspace "
                          "synced as for `ktui run --remote`; its reports land here, in .ktui/runs/")
    prof.set_defaults(handler=cmd_profile)


def cmd_profile(args: argparse.Namespace) -> int:
    """Profile, or time sections; ``--json`` prints the contract the dashboard's ``p`` reads."""
    # deferred for start-up speed
    from ktui.dispatch.owner import OwnerGone, gpu_turn_for
    from ktui.profiling.profile import ProfileOptions

    def emit(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
        sys.stdout.flush()

    def progress(message: str) -> None:
        if args.json:
            emit({"type": "profile_progress", "message": message})
        else:
            print(f"… {message}", file=sys.stderr, flush=True)

    def finish(ok: bool, message: str, summary: dict | None = None, **extra) -> None:
        if args.json:
            emit({"type": "profile_finished", "ok": ok, "message": message, "summary": summary, **extra})
        elif not ok:
            print(f"ktui: {message}", file=sys.stderr)

    options = ProfileOptions(set=args.set, shape=args.shape, clock_control=args.clock_control,
                             timeout_s=args.timeout, warmup=args.warmup)
    try:
        host = tool_host_for(args)
    except ValueError as exc:
        finish(False, str(exc))
        return EXIT_CANNOT_RUN
    # A local profile takes its turn on the workspace owner's GPU: never beside a timed run.
    turn = gpu_turn_for(args.path, f"ktui profile {args.path}") if not _remote(args) else nullcontext()
    try:
        with turn:
            return _profiled(args, options, progress, finish, host)
    except OwnerGone as exc:
        finish(False, str(exc))
        return EXIT_CANNOT_RUN


def _remote(args: argparse.Namespace) -> bool:
    return getattr(args, "remote", None) is not None


def _profiled(args, options, progress, finish, host) -> int:
    # deferred for start-up speed
    from ktui.profiling.external import CannotRun, ToolFailed
    from ktui.profiling.profile import profile, profile_sections

    try:
        if args.sections:
            report = profile_sections(args.path, options, progress, reference=args.reference, host=host)
            finish(True, f"{len(report.sections)} section(s) timed", None, sections=report.to_json())
            if not args.json:
                print(report.text())
        else:
            summary = profile(args.path, options, progress, reference=args.reference, host=host)
            finish(True, f"profiled {len(summary.kernels)} kernel(s), {summary.total_duration_us:.1f} µs in total",
                   summary.to_json())
            if not args.json:
                print(summary.text())
    except CannotRun as exc:
        finish(False, str(exc))
        return EXIT_CANNOT_RUN
    except ToolFailed as exc:
        finish(False, str(exc))
        return EXIT_FAILED
    except Exception as exc:
        finish(False, f"ktui profile failed unexpectedly: {type(exc).__name__}: {exc}")
        return EXIT_FAILED
    return EXIT_OK
