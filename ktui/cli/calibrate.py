"""``ktui calibrate``: measure this GPU's launch floor, copy bandwidth and matmul rates again, the
roofline's ceilings.

The first benchmark on a GPU kind with no calibration measures it by itself; this command measures
again (after a driver update, or to see the figures). The measuring runs in a child process
(``python -m ktui.worker.timing.calibrate``, over ssh with ``--remote``), which keeps the result in
the measuring host's per-user folder, shared by every workspace; this one shows it. A workspace
whose own ``.ktui/calibration.json`` holds the device's entry (it wins over the user's) has that
entry replaced too; no workspace file is made.
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
from ktui.measure.calibrate import Reply, read_reply


def add_parser(subparsers) -> None:
    cal = subparsers.add_parser("calibrate", help=COMMANDS["calibrate"])
    cal.add_argument("path", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    cal.add_argument("--json", action="store_true", help="print the calibration as JSON")
    cal.add_argument("--time", type=float, default=2.0, metavar="S", help="sampling cap per measurement (default 2)")
    add_remote_flags(cal, "measure HOST's GPU through the system's ssh (keys only); the result is kept there, "
                          "in HOST's per-user folder, for every run on HOST")
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
    progress = _json_progress if args.json else (lambda text: print(f"  {text} …", flush=True))
    if args.remote is not None:
        reply, where = _measure_remote(args, root, progress), f"on {args.remote}"
    else:
        reply, where = _measure_in_child(args.time, progress), "here"
    if reply is None:
        return EXIT_CANNOT_RUN
    try:
        result = calibrate.Calibration(**reply.record)
    except TypeError as exc:
        print(f"ktui: the calibration process returned a malformed result ({exc})", file=sys.stderr)
        return EXIT_CANNOT_RUN
    workspace = calibrate.save(root, result) if calibrate.holds(root, result.key) else None
    if args.json:
        print(json.dumps({**asdict(result), "path": reply.kept or None, "workspace_path": str(workspace) if workspace else None,
                          "note": reply.note}, default=str))
        return EXIT_OK
    print("\n".join(calibrate.describe(result)))
    if reply.kept:
        print(f"kept {where} in {reply.kept}: every workspace's benchmarks use it on {result.identity.words()}")
    if reply.note:
        print(f"note: {reply.note}")
    if workspace is not None:
        print(f"also replaced in {os.path.relpath(workspace)}, which holds this device's entry and wins over the user's")
    return EXIT_OK


def _json_progress(text: str) -> None:
    """``--json``: each step as a line of its own type, before the result (the MCP ``calibrate`` tool's progress)."""
    print(json.dumps({"type": "calibrate_progress", "message": text}), flush=True)


def _measure_in_child(time_s: float, progress: Callable[[str], None]) -> Reply | None:
    """Run the measurement in a process of its own (torch, Triton and the GPU stay out of this one):
    its reply, or None after saying why there is none."""
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
        return reply
    tail = "".join(stderr[-8:]).strip()
    print(f"ktui: {reply.error or f'the calibration process ended with exit code {code}' + (f': {tail}' if tail else '')}",
          file=sys.stderr)
    return None


def _measure_remote(args: argparse.Namespace, root: Path, progress: Callable[[str], None]) -> Reply | None:
    """The remote's reply, or None after saying why there is none."""
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
        progress(f"measuring on {runner.host}")
        return measure_remote(runner, root, args.time)
    except (RemoteCalibrationError, LinkDown, RuntimeError, ValueError, OSError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return None
    finally:
        runner.close()
