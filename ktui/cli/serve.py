"""``ktui serve``: the workspace's daemon (``ktui.watch.service``) in this terminal, or, with
``--status`` and ``--stop``, the one running. Every ``ktui run``, ``ktui mcp`` and ``ktui watch``
of the workspace submits to it instead of starting its own worker; they start one in the
background themselves when there is none (``--detached``, ``ktui.dispatch.daemon``)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.options import (
    add_gpus_flag,
    add_network_flag,
    add_ray_flag,
    add_state_dir,
    add_target_flags,
    one_folder,
    placement_of,
)

TICK_S = 1.0  # how often the daemon looks at how long it has been idle


def add_parser(subparsers) -> None:
    serve = subparsers.add_parser("serve", help=COMMANDS["serve"])
    serve.add_argument("dir", nargs="?", type=Path, default=Path("."), help="the workspace (default: .)")
    add_target_flags(serve)
    add_network_flag(serve)
    add_gpus_flag(serve)
    add_ray_flag(serve)
    add_state_dir(serve)
    asked = serve.add_mutually_exclusive_group()
    asked.add_argument("--status", action="store_true",
                       help="say what serves the workspace (pid, placement, runs, views, idle time) and exit")
    asked.add_argument("--stop", action="store_true", help="stop the workspace's daemon (its runs are cancelled)")
    serve.add_argument("--json", action="store_true", help="with --status: the status as one JSON object")
    # How a caller starts the daemon in the background (``ktui.dispatch.daemon.start``).
    serve.add_argument("--detached", action="store_true",
                       help="serve as the workspace's background daemon: end when idle (KTUI_DAEMON_IDLE_S); "
                            "ktui run, mcp and watch start one this way when none serves the workspace")
    serve.add_argument("--ready-fd", type=int, default=None, metavar="FD",
                       help="write 'ready' on this file descriptor once serving (how a caller waits for the daemon)")
    serve.add_argument("--placement", default=None, metavar="JSON",
                       help="where the runs happen, as a placement's JSON (instead of --gpus, --cpu, --arch)")
    serve.set_defaults(handler=cmd_serve, session=True)  # a long-lived worker: it may keep compile-ahead helpers


def cmd_serve(args: argparse.Namespace) -> int:
    from ktui.workspace.folder import Workspace  # deferred for start-up speed
    from ktui.workspace.kernels import ProblemError, state_dir

    try:
        one_folder(args)  # `--ray ws`: the folder is the workspace, Ray started here
        root = Workspace.at(args.dir).root
    except (ProblemError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    state = state_dir(root)
    if args.status:
        return _status(state, root, args.json)
    if args.stop:
        return _stop(state, root)
    return _serve(args, root, state)


def _status(state: Path, root: Path, as_json: bool) -> int:
    from ktui.dispatch.owner import OwnerGone, OwnerLink, Refused  # deferred for start-up speed

    link = OwnerLink.connect(state)
    if link is None:
        print(json.dumps({"type": "owner_status", "pid": None}) if as_json else f"no daemon serves {root}")
        return EXIT_FAILED
    try:
        status = link.status()
    except (OwnerGone, Refused) as exc:
        print(f"ktui: the owner of {root} (pid {link.pid}) did not say: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if as_json:
        print(status.dumps())
        return EXIT_OK
    from ktui.dispatch.placement import Placement

    kind = "the workspace's daemon" if status.daemon else "a ktui command (it ends with its command)"
    limits = ", ".join(f"{name} after {seconds:g} s" for name, seconds in status.idle_limits_s.items())
    print(f"{root}: {kind}, pid {status.pid}, runs on {Placement.from_json(status.placement).words()}")
    print(f"  {status.runs} run(s) in flight or queued, {status.views} view(s), {status.callers} other caller(s); "
          f"worker {'warm' if status.worker else 'not started'}; idle {status.idle_s:g} s"
          + (f" (ends idle: {limits})" if limits else ""))
    print(f"  ktui {status.identity.get('version', '?')} · {status.identity.get('python', '?')}"
          + (f" · log {status.log}" if status.log else ""))
    return EXIT_OK


def _stop(state: Path, root: Path) -> int:
    from ktui.dispatch.daemon import stop  # deferred for start-up speed
    from ktui.dispatch.owner import OwnerGone, OwnerLink, Refused

    link = OwnerLink.connect(state)
    if link is None:
        print(f"no daemon serves {root}")
        return EXIT_OK
    try:
        answer = stop(link, "ktui serve --stop")
    except (OwnerGone, Refused) as exc:
        print(f"ktui: the owner of {root} (pid {link.pid}) did not stop: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not answer.stopped:
        print(f"ktui: the owner of {root} (pid {link.pid}) did not stop: {answer.message}", file=sys.stderr)
        return EXIT_FAILED
    print(f"stopped the daemon of {root} (pid {link.pid})")
    return EXIT_OK


def _serve(args: argparse.Namespace, root: Path, state: Path) -> int:
    # deferred for start-up speed
    from ktui.dispatch.daemon import LOG, READY
    from ktui.dispatch.owner import OwnerServer, owner_folder, owner_pid
    from ktui.dispatch.placement import Placement, place
    from ktui.protocol.events import RunFinished
    from ktui.watch.service import IdleLimits, Service

    try:
        placement = Placement.from_json(json.loads(args.placement)) if args.placement else placement_of(args)
        limits = IdleLimits.from_env(args.detached)
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    server = OwnerServer.claim(state, placement=placement)  # its queue once its workers are made
    if server is None:
        print(f"ktui: the workspace is already owned by pid {owner_pid(state)}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        placed = place(placement, root=root, session=True, source=getattr(args, "runners", None))
    except ValueError as exc:
        server.close()
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN

    def say(line: str) -> None:
        print(f"ktui {'daemon' if args.detached else 'serve'}: {line}", flush=True)

    log = str(owner_folder(state) / LOG) if args.detached else ""
    service = Service(root, placed, server, limits, args.detached, log=log, say=say)

    def told(item) -> None:
        if isinstance(item, RunFinished):
            say(f"{item.run_id[:8]}: {item.verdict}")

    service.queue.follow(told)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.set())
    try:
        service.serve()
    except OSError as exc:
        service.shutdown(f"cancelled: {exc}")
        print(f"ktui: the owner's socket could not be made: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    say(f"owning {root} ({placement.words()}) on {server.path}, pid {os.getpid()}")
    if args.ready_fd is not None:
        os.write(args.ready_fd, READY)
        os.close(args.ready_fd)
    try:
        while not stop.wait(TICK_S) and not service.stopped.is_set():
            service.tick()
    finally:
        service.shutdown(f"cancelled: ktui {'daemon' if args.detached else 'serve'} stopped")
    return EXIT_OK
