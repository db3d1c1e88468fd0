"""``ktui run --ray [ADDRESS] PATHS...``: the kernels judged in parallel on Ray.

``--json`` prints each event as it arrives (the runs of different actors interleave, each event
naming its run); the plain lines come a run at a time, when it finishes, so each kernel's rungs
stay under its header."""

from __future__ import annotations

import argparse
import sys

from ktui.cli.exits import EXIT_CANNOT_RUN, exit_code
from ktui.cli.options import loop_options, worker_config
from ktui.cli.printers import JsonPrinter, LinePrinter


def cmd_run_ray(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.run.ray_pool import RayMissing, RayPool, evaluate
    from ktui.workspace.kernels import ProblemError, discover

    try:
        kernels = discover(args.paths, reference=args.reference)
        options = loop_options(args)
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    printer = JsonPrinter() if args.json else ByRun(LinePrinter(verbose=args.verbose))
    try:
        pool = RayPool(args.ray, worker_config(args), fresh_each_run=args.cold)
    except RayMissing as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster at that address
        print(f"ktui: could not join the Ray cluster at {args.ray}: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        finished = evaluate(pool, kernels, options, consumers=[printer])
    finally:
        pool.close()
    return exit_code([run.verdict for run in finished])


class ByRun:
    """A consumer that holds each run's events and hands them to ``printer`` when the run ends."""

    def __init__(self, printer):
        self.printer = printer
        self._held: dict[str, list] = {}

    def __call__(self, event) -> None:
        held = self._held.setdefault(event.run_id, [])
        held.append(event)
        if event.type == "run_finished":
            for each in self._held.pop(event.run_id):
                self.printer(each)
