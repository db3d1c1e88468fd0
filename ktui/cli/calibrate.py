"""``ktui calibrate``: measure this GPU's copy bandwidth and matmul rates, the roofline's ceilings.

The measuring runs in a child process (``python -m ktui.worker.timing.calibrate``); this one saves and shows it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK
from ktui.cli.options import add_remote_flags
from ktui.dispatch.proc import child_env, end_tree
from ktui.measure.calibrate import read_reply


def add_parser(subparsers) -> None:
    cal = subparsers.add_parser("calibrate", help=COMMANDS["calibrate"])
    cal.add_argument("path", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    cal.add_argument("--json", action="store_true", help="print the calibration as JSON")
    cal.add_argument("--time", type=float, default=2.0, metavar="S", help="sampling cap per measurement (default 2)")
    add_remote_flags(cal, "measure HOST's GPU through the system's ssh (keys only); the result is saved here, "
                          "in the workspace's .ktui/calibration.json, and sent with every remote run")
    cal.set_defaults(handler=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> int:
    # deferred for start-up speed
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
        progress = (lambda _: None) if args.json else (lambda text: print(f"  measuring {text} …", flush=True))
        record, why = _measure_in_child(args.time, progress)
        if record is None:
            print(f"ktui: {why}", file=sys.stderr)
            return EXIT_CANNOT_RUN
        try:
            result = calibrate.Calibration(**record)
        except TypeError as exc:
            print(f"ktui: the calibration process returned a malformed result ({exc})", file=sys.stderr)
            return EXIT_CANNOT_RUN
    path = calibrate.save(root, result)
    if args.json:
        print(json.dumps({**asdict(result), "path": str(path)}, default=str))
    else:
        print("\n".join(calibrate.describe(result)))
        print(f"saved to {os.path.relpath(path)}: `ktui run` uses these ceilings on this device and driver")
    return EXIT_OK


def _measure_in_child(time_s: float, progress: Callable[[str], None]) -> tuple[dict | None, str]:
    """Run the measurement in a process of its own (torch, Triton and the GPU stay out of this one):
    (the calibration's fields, "") or (None, why not)."""
    argv = [sys.executable, "-m", "ktui.worker.timing.calibrate", "--time", str(time_s)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", env=child_env(), start_new_session=True)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    reader.start()
    try:
        reply = read_reply(proc.stdout, progress)
        code = proc.wait()
    finally:
        end_tree(proc)
        reader.join(timeout=2)
    if reply.record is not None and code == 0:
        return reply.record, ""
    tail = "".join(stderr[-8:]).strip()
    return None, reply.error or f"the calibration process ended with exit code {code}" + (f": {tail}" if tail else "")


def _measure_remote(args: argparse.Namespace, root: Path):
    """The remote's calibration, or None after saying why there is none."""
    # deferred for start-up speed
    from ktui.cli.options import placement_of
    from ktui.dispatch.placement import place
    from ktui.dispatch.remote.calibrate import RemoteCalibrationError, measure_remote
    from ktui.dispatch.remote.link import LinkDown

    try:
        runner = place(placement_of(args), root=root).runner
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
