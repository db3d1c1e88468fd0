"""``ktui run``: the loop once on kernel files or folders, one line per rung (or the events as JSON);
then, the verdicts told, the fast audit of each reference version never audited (``--no-audit``: none)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, exit_code
from ktui.cli.options import (
    add_bench_flags,
    add_gpus_flag,
    add_loop_flags,
    add_ray_flag,
    add_reference,
    add_remote_flags,
    add_state_dir,
    check_placement,
    close_placement,
    loop_options,
    placement,
    runner_for,
    runners_of,
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
                     help="the final word: a fresh process per run, more seeds per shape, every timed output re-checked")
    run.add_argument("-v", "--verbose", action="store_true", help="also print what the kernel printed")
    run.add_argument("--no-audit", action="store_true",
                     help="do not audit the references never audited (after the verdicts, the fast checks of "
                          "`ktui audit`: does a trivial kernel pass their test?)")
    add_bench_flags(run)
    add_ray_flag(run)
    add_gpus_flag(run)
    add_remote_flags(run)
    run.set_defaults(handler=cmd_run, parser=run)


def cmd_run(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.dispatch.owner import OwnerLink, OwnerServer
    from ktui.dispatch.queue import RunQueue
    from ktui.dispatch.runner import WorkerStartError
    from ktui.dispatch.session import Session
    from ktui.workspace.kernels import ProblemError, discover, left_out, state_dir

    args.paths = [*getattr(args, "ray_paths", []), *args.paths]  # `--ray kernels/`: the folder is a path
    if not args.paths:  # argparse's usage, then what to give (exit 2)
        args.parser.error("give the kernel files or folders to run, e.g. `ktui run kernels/` in a workspace")
    try:
        check_placement(args)  # before an owner is asked: a caller's two placements are refused here
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
    if not kernels:
        return _audited(args, kernels, options, exit_code([]))
    state = state_dir(kernels[0].root)
    link = OwnerLink.connect(state)
    if link is not None:  # a watch (or `ktui serve`) owns this workspace's GPUs: its queue runs these
        return _audited(args, kernels, options, _through_owner(link, state, args, options, printer))
    try:
        runner = runner_for(args, fresh_each_run=args.cold)  # here, several GPUs, a remote host or Ray
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if not reached(runner):
        return EXIT_CANNOT_RUN
    # One queue, one thread per GPU (per Ray actor): on several the kernels run in parallel, printed as they finish.
    runners = runners_of(runner)
    queue = RunQueue(Session(kernels[0].root, runner=runners[0], consumers=[printer]), options, listener=_unheard,
                     warm_up=False, runners=runners, consumers=[printer])
    queue.start()
    server = OwnerServer.claim(state, queue, placement(args))  # no owner: this command owns the GPUs while it runs
    try:
        with Stopping(queue) as stopping:
            verdicts = _verdicts(queue, kernels, options, args.reference)
            if server is not None:
                server.stop_accepting()  # no more callers; those accepted get their runs to the end
                while not queue.idle and stopping.signum is None:
                    time.sleep(0.05)
    except WorkerStartError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        if server is not None:
            server.stop_accepting()
        queue.close(STOPPED)
        close_placement(args, runner)  # a Ray pool's actors, and Ray when it started it
        if server is not None:
            server.close()  # the workspace is free once its runs have ended
    if stopping.signum is not None:  # stopped by a signal: the verdicts so far, no audit
        return stopping.exit_code
    return _audited(args, kernels, options, exit_code(verdicts))


STOPPED = "cancelled: ktui run stopped"


def _unheard(item) -> None:
    """The queue's own notices: ``ktui run`` prints the events through the sessions' printer."""


def _through_owner(link, state: Path, args: argparse.Namespace, options, printer) -> int:
    """The verdicts' exit code of the runs the workspace's owner made for us, their events printed as
    they come; a reference that changed during a run has the kernel run once more, as without an owner."""
    from ktui.dispatch.owner import OwnerGone, OwnerLink
    from ktui.protocol.events import RunFinished, RunStarted  # deferred for start-up speed

    verdicts, again, starts = [], [], {}
    try:
        for event in link.run(args.paths, options, placement(args), args.reference):
            printer(event)
            if isinstance(event, RunStarted):
                starts[event.run_id] = event
            elif isinstance(event, RunFinished) and (changed := event.summary.get("reference_changed")):
                start = starts[event.run_id]  # judged by a reference that changed since: run it again
                print(f"ktui: {start.kernel}: {Path(start.reference).name} changed during the run (recorded "
                      f"{changed['recorded']}, now {changed['now']}); its {event.verdict} stands against the recorded "
                      "version: running it again against the new reference", file=sys.stderr)
                again.append(Path(start.path))
            elif isinstance(event, RunFinished):
                verdicts.append(event.verdict)
        if again:  # a new call: each request is one connection
            relink = OwnerLink.connect(state)
            for event in relink.run(again, options, placement(args), args.reference, again=True) if relink else ():
                printer(event)
                if isinstance(event, RunFinished):
                    verdicts.append(event.verdict)
    except (OwnerGone, RuntimeError, OSError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    return exit_code(verdicts)


def reached(runner) -> bool:
    """A ``--remote`` host is reached once before any kernel: unreachable, it is said once and no
    run is recorded (each kernel would otherwise record an ``interrupted`` run)."""
    link = getattr(runner, "link", None)
    if link is None:
        return True
    from ktui.dispatch.remote.link import LinkDown  # deferred for start-up speed

    try:
        link.connect()
    except LinkDown as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        runner.close()
        return False
    return True


def _audited(args: argparse.Namespace, kernels, options, code: int) -> int:
    """The fast audit of the references never audited, told after every verdict; ``code`` (the
    verdicts' exit status) is returned whatever the audit says, or if it is interrupted."""
    if args.no_audit:
        return code
    from ktui.cli.printers import print_first_audits  # deferred for start-up speed
    from ktui.dispatch.first_audit import audit_new_references

    try:
        print_first_audits(audit_new_references(kernels, options), as_json=args.json)
    except KeyboardInterrupt:
        print("ktui: audit interrupted: nothing was cached", file=sys.stderr)
    return code


def _verdicts(queue, kernels, options, reference) -> list[str]:
    """Each kernel's verdict. A reference that changed on disk during a run (its recorded version
    judged it) cancels that verdict: the kernel runs once more against the new reference, saying so."""
    from ktui.workspace.kernels import ProblemError, kernel_for

    verdicts = []
    for kernel, finished in queue.batch(kernels, options):
        changed = finished.summary.get("reference_changed")
        if not changed:
            verdicts.append(finished.verdict)
            continue
        shown = kernel.reference.name if kernel.reference else "its reference"
        print(f"ktui: {kernel.id}: {shown} changed during the run (recorded {changed['recorded']}, now {changed['now']}); "
              f"its {finished.verdict} stands against the recorded version: running it again against the new reference",
              file=sys.stderr)
        try:
            kernel = kernel_for(kernel.path, reference, kernel.root)
        except ProblemError as exc:
            print(f"ktui: {exc}", file=sys.stderr)
            verdicts.append("error")
            continue
        for _, again in queue.batch([kernel], options, again=True):
            if again.summary.get("reference_changed"):
                print(f"ktui: {kernel.id}: {shown} changed again during the second run: its {again.verdict} stands "
                      f"against the version it recorded ({again.summary['reference_changed']['recorded']})",
                      file=sys.stderr)
            verdicts.append(again.verdict)
    return verdicts
