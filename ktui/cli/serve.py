"""``ktui serve``: own a workspace's GPUs with a warm worker and no UI, so that every ``ktui run``
and ``ktui mcp`` of the workspace submits to it (``ktui.dispatch.owner``) instead of starting its own."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN
from ktui.cli.options import (
    add_gpus_flag,
    add_network_flag,
    add_ray_flag,
    add_state_dir,
    add_target_flags,
    close_placement,
    one_folder,
    placement,
    runner_for,
    runners_of,
)


def add_parser(subparsers) -> None:
    serve = subparsers.add_parser("serve", help=COMMANDS["serve"])
    serve.add_argument("dir", nargs="?", type=Path, default=Path("."), help="the workspace (default: .)")
    add_target_flags(serve)
    add_network_flag(serve)
    add_gpus_flag(serve)
    add_ray_flag(serve)
    add_state_dir(serve)
    serve.set_defaults(handler=cmd_serve, session=True)  # a long-lived worker: it may keep compile-ahead helpers


def cmd_serve(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.dispatch.owner import OwnerServer, owner_pid
    from ktui.dispatch.queue import RunQueue
    from ktui.dispatch.session import Session
    from ktui.protocol.events import RunFinished
    from ktui.protocol.job import Options
    from ktui.workspace.folder import Workspace
    from ktui.workspace.kernels import ProblemError, state_dir

    try:
        one_folder(args)  # `--ray ws`: the folder is the workspace, Ray started here
        root = Workspace.at(args.dir).root
    except (ProblemError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    state = state_dir(root)
    server = OwnerServer.claim(state, placement=placement(args))  # its queue once its workers are made
    if server is None:
        print(f"ktui: the workspace is already owned by pid {owner_pid(state)}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        runner = runner_for(args, root=root)  # here, several GPUs or Ray
    except ValueError as exc:
        server.close()
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    runners = runners_of(runner)  # one per GPU (per Ray actor)

    def told(item) -> None:
        if isinstance(item, RunFinished):
            print(f"{item.run_id[:8]}: {item.verdict}", flush=True)

    queue = RunQueue(Session(root, runner=runners[0]), Options(arch=args.arch, force_cpu=args.cpu,
                                                                allow_network=args.allow_network), told,
                     runners=runners)  # warm from the start: the first caller gets a ready worker
    queue.start()
    server.serve(queue)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: stop.set())
    print(f"ktui serve: owning {root} ({placement(args)}) on {server.path}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop_accepting()
        queue.close("cancelled: ktui serve stopped")
        close_placement(args, runner)  # a Ray pool's actors, and Ray when it started it
        server.close()
    return 0
