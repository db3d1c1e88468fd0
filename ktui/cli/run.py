"""``ktui run``: the loop once on kernel files or folders, one line per rung (or the events as JSON);
then, the verdicts told, the fast audit of each reference version never audited (``--no-audit``:
none): handed to the workspace's owner, which does it in its background after this command has
exited, or said to be still to do; ``--strict`` waits for it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, exit_code
from ktui.cli.options import (
    add_bench_flags,
    add_daemon_flag,
    add_gpus_flag,
    add_loop_flags,
    add_ray_flag,
    add_reference,
    add_remote_flags,
    add_state_dir,
    daemon_wanted,
    loop_options,
    placement_of,
)
from ktui.cli.printers import JsonPrinter, LinePrinter
from ktui.cli.stopping import Stopping


def add_parser(subparsers) -> None:
    run = subparsers.add_parser("run", help=COMMANDS["run"])
    run.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                     help="kernel files, or folders of kernels (a workspace, its kernels/, a GPU MODE problem); at least one")
    add_reference(run)
    add_state_dir(run)
    run.add_argument("--json", action="store_true", help="print the loop's events as JSON lines")
    add_loop_flags(run)
    run.add_argument("--cold", action="store_true", help="a fresh worker process for every kernel")
    run.add_argument("--strict", action="store_true",
                     help="the final word: a fresh process per run, more seeds per shape, every timed output re-checked, "
                          "the audit of each reference never audited waited for; exit 4 when a pass cannot be trusted")
    run.add_argument("-v", "--verbose", action="store_true", help="also print what the kernel printed")
    run.add_argument("--no-audit", action="store_true",
                     help="do not audit the references never audited (after the verdicts, in the workspace owner's "
                          "background, the fast checks of `ktui audit`: does a trivial kernel pass their test?)")
    add_bench_flags(run)
    add_ray_flag(run)
    add_gpus_flag(run)
    add_remote_flags(run)
    add_daemon_flag(run)
    run.set_defaults(handler=cmd_run, parser=run)


def cmd_run(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.cli.run_trust import TrustTally
    from ktui.dispatch.runs import open_runs
    from ktui.workspace.kernels import ProblemError, discover, left_out

    args.paths = [*getattr(args, "ray_paths", []), *args.paths]  # `--ray kernels/`: the folder is a path
    if not args.paths:  # argparse's usage, then what to give (exit 2)
        args.parser.error("give the kernel files or folders to run, e.g. `ktui run kernels/` in a workspace")
    try:
        placement = placement_of(args)  # before an owner is asked: a caller's two placements are refused here
        kernels = discover(args.paths, reference=args.reference)
        options = loop_options(args)
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    for why in left_out(args.paths):  # files that would be kernels but for their name: said, not run
        print(f"ktui: {why}", file=sys.stderr)
    printer = JsonPrinter() if args.json else LinePrinter(verbose=args.verbose)
    if args.ray is not None and not args.json:
        from ktui.cli.ray_run import ByRun  # deferred: Ray is an optional extra

        printer = ByRun(printer)  # the runs of several actors interleave: each printed when it ends
    printer = TrustTally(printer)  # each run's verdict kept for the word on trust after the audits
    if not kernels:
        return _audited(args, kernels, options, exit_code([]), printer, None)
    try:
        # Through the workspace's daemon (started if need be), the owner already there, or a queue
        # of this command's own: here, several GPUs, a remote host or Ray.
        runs = open_runs(kernels[0].root, placement, daemon=daemon_wanted(args), say=_say,
                         source=getattr(args, "runners", None))
    except (OSError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    stream = runs.run(kernels, options, args.reference)
    with Stopping(stream) as stopping:
        try:
            verdicts = _verdicts(stream, printer)
        finally:
            runs.close(STOPPED, others=stopping.signum is None)  # a one-shot owner lets others' runs end first
    if stopping.signum is not None:  # stopped by a signal: the verdicts so far, no audit
        return stopping.exit_code
    return _audited(args, kernels, options, exit_code(verdicts, asked=len(kernels)), printer, runs)


STOPPED = "cancelled: ktui run stopped"


def _say(line: str) -> None:
    print(f"ktui: {line}", file=sys.stderr, flush=True)


def _verdicts(stream, printer) -> list[str]:
    """Each kernel's verdict from its runs' events, printed as they come. A reference that changed
    on disk during a run runs that kernel once more (``ktui.dispatch.queue``): said here, and the
    second run's verdict is the kernel's. A kernel left without a verdict, or runs that could not
    happen, are said in one line (the exit code then says "could not run")."""
    # deferred for start-up speed
    from ktui.dispatch.owner import OwnerGone
    from ktui.dispatch.queue import NoVerdict
    from ktui.dispatch.runs import is_verdict
    from ktui.dispatch.worker_protocol import WorkerStartError
    from ktui.protocol.events import RunFinished, RunStarted

    verdicts: list[str] = []
    starts: dict[str, RunStarted] = {}
    changed_once: set[str] = set()
    try:
        for event in stream:
            printer(event)
            if isinstance(event, RunStarted):
                starts[event.run_id] = event
            elif isinstance(event, RunFinished):
                _say_reference_changed(starts.pop(event.run_id, None), event, changed_once)
                if is_verdict(event):
                    verdicts.append(event.verdict)
    except (NoVerdict, OwnerGone, WorkerStartError, RuntimeError) as exc:  # a closed stdout goes up to main
        print(f"ktui: {exc}", file=sys.stderr)
    return verdicts


def _say_reference_changed(start, finished, changed_once: set[str]) -> None:
    """The line a run judged by a reference that changed during it earns."""
    changed = finished.summary.get("reference_changed")
    if not changed or start is None:
        return
    shown = Path(start.reference).name if start.reference else "its reference"
    if start.path not in changed_once:
        changed_once.add(start.path)
        print(f"ktui: {start.kernel}: {shown} changed during the run (recorded {changed['recorded']}, now "
              f"{changed['now']}); its {finished.verdict} stands against the recorded version: running it again "
              "against the new reference", file=sys.stderr)
    else:
        print(f"ktui: {start.kernel}: {shown} changed again during the second run: its {finished.verdict} stands "
              f"against the version it recorded ({changed['recorded']})", file=sys.stderr)


def _audited(args: argparse.Namespace, kernels, options, code: int, tally, runs) -> int:
    """The first audit of each reference version never audited, once every verdict is told: waited
    for under ``--strict``; else handed to the workspace's owner (``runs``), which outlives this
    command, or said to be still to do, with how (the command exits at its verdicts either way).
    Then what the audits make of each pending pass (``ktui.cli.run_trust``); ``code`` (the verdicts'
    exit status) is returned whatever the audit says, or if it is interrupted, but for
    ``--strict``'s untrusted pass."""
    # deferred for start-up speed
    from ktui.cli.printers import print_first_audits
    from ktui.cli.run_trust import settle
    from ktui.dispatch.first_audit import audit_new_references, not_audited, unaudited

    audits = []
    if args.no_audit:
        pass
    elif args.strict:  # the final word: the audit waited for
        try:
            audits = print_first_audits(audit_new_references(kernels, options), as_json=args.json)
        except KeyboardInterrupt:
            print("ktui: audit interrupted: nothing was cached", file=sys.stderr)
    elif todo := unaudited(kernels):
        handed = runs.hand_audits(kernels, options, args.reference) if runs is not None else None
        found = not_audited(todo, handed.auditing, handed.failed, handed.by) if handed else not_audited(todo)
        audits = print_first_audits(found, as_json=args.json)
    return settle(tally, kernels, audits, args.strict, args.json, code)
