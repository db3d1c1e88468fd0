"""``ktui history``: the stored versions of a kernel; also how ``diff`` and ``pin`` find its history."""

from __future__ import annotations

import argparse
import json
import sys

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK
from ktui.cli.options import add_kernel_path, add_reference, add_state_dir


def add_parser(subparsers) -> None:
    hist = subparsers.add_parser("history", help=COMMANDS["history"])
    add_kernel_path(hist)
    add_reference(hist)
    add_state_dir(hist)
    hist.add_argument("--json", action="store_true",
                      help="one JSON object per run, with its rungs and its timed shapes on the GPU's roofline")
    hist.add_argument("--limit", type=int, default=50, help="list at most this many versions, newest first (default 50)")
    hist.set_defaults(handler=cmd_history)


def cmd_history(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.dispatch.trust import current, with_trust
    from ktui.history import roofline_chart
    from ktui.history.store import Store
    from ktui.protocol.lines import summary_line
    from ktui.workspace.kernels import state_dir

    kernel = stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    state = state_dir(kernel.root)
    store = Store.of(state)
    runs = store.runs(kernel.id, limit=args.limit)
    for run in runs:  # trust as it is now: a pass stored pending is settled by its reference's audit since
        run.summary = with_trust(run.summary, current(state, run.verdict, run.summary, run.reference_hash))
    if args.json:
        roofs: dict[str, object] = {}
        for run in runs:
            record = run.to_json()
            record["rungs"] = store.rungs(run.run_id)
            placed = roofline_chart.points_of_run(run.version, run.device, record["rungs"],
                                                  roofline_chart.done_of(run.summary))
            if placed:  # its timed shapes on the GPU's roofline, the points the dashboard's chart draws
                if run.device not in roofs:
                    roofs[run.device] = roofline_chart.roofs_for(kernel.root, run.device)[0]
                record["roofline"] = roofline_chart.chart_json(placed, roofs[run.device])
            print(json.dumps(record, default=str))
        return EXIT_OK
    if not runs:
        print(f"{kernel.id}: no runs recorded yet ({run_hint(args)})")
        return EXIT_OK
    from datetime import datetime  # deferred for start-up speed

    for run in runs:
        when = datetime.fromtimestamp(run.started).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{when}  " + summary_line(run.kernel, run.version, run.verdict, run.summary, run.tier, run.arch,
                                         run.duration_s or 0.0, run.message))
    return EXIT_OK


def stored_kernel(args: argparse.Namespace):
    """The kernel at ``args.path`` (with ``--reference``) for the commands that read its history,
    resolved as ``ktui run`` resolves it so they find the same ``.ktui/``; None after saying why."""
    from ktui.workspace.kernels import ProblemError, kernel_for  # deferred for start-up speed

    try:
        return kernel_for(args.path, args.reference)
    except ProblemError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return None


def run_hint(args: argparse.Namespace) -> str:
    """The ``ktui run`` command that records what a history command found missing."""
    reference = f" --reference {args.reference}" if args.reference is not None else ""
    return f"ktui run {args.path}{reference}"
