"""``ktui calibrate``: measure this GPU's copy bandwidth and matmul rates, the roofline's ceilings."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK


def add_parser(subparsers) -> None:
    cal = subparsers.add_parser("calibrate", help="measure this GPU's copy bandwidth and matmul rates for the roofline")
    cal.add_argument("path", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    cal.add_argument("--json", action="store_true", help="print the calibration as JSON")
    cal.add_argument("--time", type=float, default=2.0, metavar="S", help="sampling cap per measurement (default 2)")
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
    import torch  # deferred: torch takes seconds, and only after the arguments are checked

    if not torch.cuda.is_available():
        print("ktui: calibrate needs a CUDA GPU (torch.cuda.is_available() is False on this machine)", file=sys.stderr)
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
