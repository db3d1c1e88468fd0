"""``ktui calibrate``: measure this GPU's copy bandwidth and matmul rates, the roofline's ceilings."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK
from ktui.cli.options import add_remote_flags


def add_parser(subparsers) -> None:
    cal = subparsers.add_parser("calibrate", help="measure this GPU's copy bandwidth and matmul rates for the roofline")
    cal.add_argument("path", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    cal.add_argument("--json", action="store_true", help="print the calibration as JSON")
    cal.add_argument("--time", type=float, default=2.0, metavar="S", help="sampling cap per measurement (default 2)")
    add_remote_flags(cal, "measure HOST's GPU through the system's ssh (keys only); the result is saved here, "
                          "in the workspace's .ktui/calibration.json, and sent with every remote run")
    cal.set_defaults(handler=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from dataclasses import asdict

    from ktui.measure import calibrate
    from ktui.workspace.kernels import ProblemError, find_root

    try:
        root = find_root(args.path)
    except ProblemError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.time <= 0:
        print(f"ktui: --time must be positive, got {args.time}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.remote is not None:
        result = _measure_remote(args, root)
        if result is None:
            return EXIT_CANNOT_RUN
    else:
        import torch  # deferred: torch takes seconds, and only after the arguments are checked

        if not torch.cuda.is_available():
            print("ktui: calibrate needs a CUDA GPU (torch.cuda.is_available() is False on this machine)",
                  file=sys.stderr)
            return EXIT_CANNOT_RUN
        progress = (lambda _: None) if args.json else (lambda text: print(f"  measuring {text} …", flush=True))
        result = calibrate.measure(args.time, progress)
    path = calibrate.save(root, result)
    if args.json:
        print(json.dumps({**asdict(result), "path": str(path)}, default=str))
    else:
        print("\n".join(calibrate.describe(result)))
        print(f"saved to {os.path.relpath(path)}: `ktui run` uses these ceilings on this device and driver")
    return EXIT_OK


def _measure_remote(args: argparse.Namespace, root: Path):
    """The remote's calibration, or None after saying why there is none."""
    # deferred for start-up speed
    from ktui.cli.options import runner_for
    from ktui.run.remote.calibrate import RemoteCalibrationError, measure_remote
    from ktui.run.remote.link import LinkDown

    try:
        runner = runner_for(args, root=root)
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return None
    try:
        if not args.json:
            print(f"  measuring on {runner.host} …", flush=True)
        return measure_remote(runner, root, args.time)
    except (RemoteCalibrationError, LinkDown, RuntimeError, ValueError, OSError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return None
    finally:
        runner.close()
