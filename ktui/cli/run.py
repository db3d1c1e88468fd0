"""``ktui run``: the loop once on kernel files or folders, one line per rung (or the events as JSON)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktui.cli.exits import EXIT_CANNOT_RUN, exit_code
from ktui.cli.options import (
    add_bench_flags,
    add_gpus_flag,
    add_loop_flags,
    add_ray_flag,
    add_reference,
    add_remote_flags,
    add_state_dir,
    loop_options,
    runner_for,
)
from ktui.cli.printers import JsonPrinter, LinePrinter
from ktui.cli.stopping import Stopping


def add_parser(subparsers) -> None:
    run = subparsers.add_parser("run", help="run the loop once on kernel files or folders")
    run.add_argument("paths", nargs="+", type=Path)
    add_reference(run)
    add_state_dir(run)
    run.add_argument("--json", action="store_true", help="print the loop's events as JSON lines")
    add_loop_flags(run, timeout_help="per-rung time limit, e.g. --timeout correctness=30 (repeatable)")
    run.add_argument("--cold", action="store_true", help="a fresh worker process for every kernel")
    run.add_argument("--strict", action="store_true",
                     help="the final word: a fresh process per run, more seeds per shape, every timed output re-checked")
    run.add_argument("-v", "--verbose", action="store_true", help="also print what the kernel printed")
    add_bench_flags(run)
    add_ray_flag(run)
    add_gpus_flag(run)
    add_remote_flags(run)
    run.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.run.pool import DevicePool
    from ktui.run.runner import WorkerStartError
    from ktui.run.session import Session
    from ktui.workspace.kernels import ProblemError, discover

    if args.ray is not None and args.gpus is not None:
        print("ktui: --gpus picks GPUs of this host: with --ray, Ray places the runs (one worker per GPU it has)",
              file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.ray is not None:
        from ktui.cli.ray_run import cmd_run_ray  # deferred: Ray is an optional extra

        return cmd_run_ray(args)
    try:
        kernels = discover(args.paths, reference=args.reference)
        options = loop_options(args)
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    printer = JsonPrinter() if args.json else LinePrinter(verbose=args.verbose)
    verdicts = []
    try:
        runner = runner_for(args, fresh_each_run=args.cold)
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if not reached(runner):
        return EXIT_CANNOT_RUN
    if isinstance(runner, DevicePool):  # several GPUs: the kernels in parallel, printed as they finish
        from ktui.run.ray_pool import evaluate  # its recording in finish order; Ray itself is not imported

        try:
            return exit_code([run.verdict for run in evaluate(runner, kernels, options, consumers=[printer])])
        finally:
            runner.close()
    sessions: dict[Path, Session] = {}
    try:
        with Stopping(runner) as stopping:
            for kernel in kernels:
                if stopping.signum is not None:
                    break
                session = sessions.get(kernel.root)
                if session is None:
                    session = sessions[kernel.root] = Session(kernel.root, runner=runner, consumers=[printer])
                verdicts.append(session.run(kernel, options).verdict)
    except WorkerStartError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        for session in sessions.values():
            session.close()
    return stopping.exit_code or exit_code(verdicts)


def reached(runner) -> bool:
    """A ``--remote`` host is reached once before any kernel: unreachable, it is said once and no
    run is recorded (each kernel would otherwise record an ``interrupted`` run)."""
    link = getattr(runner, "link", None)
    if link is None:
        return True
    from ktui.run.remote.link import LinkDown  # deferred for start-up speed

    try:
        link.connect()
    except LinkDown as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        runner.close()
        return False
    return True
