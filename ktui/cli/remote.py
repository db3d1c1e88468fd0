"""``ktui remote check HOST``: what a remote GPU host has for ktui's runs, one line each."""

from __future__ import annotations

import argparse
import sys

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK
from ktui.cli.options import REMOTE_PYTHON_HELP


def add_parser(subparsers) -> None:
    remote = subparsers.add_parser("remote", help=COMMANDS["remote"])
    verbs = remote.add_subparsers(dest="remote_command", required=True)
    check = verbs.add_parser("check", help="Python, torch, each DSL (Triton, CuTeDSL, TileLang…), ktui, the GPU, ncu and "
                                           "compute-sanitizer on HOST")
    check.add_argument("host", metavar="[USER@]HOST[:PORT]", help="the host to check, as ssh reaches it")
    check.add_argument("--ssh-config", default=None, metavar="FILE",
                       help="an ssh config file used instead of ~/.ssh/config (default: $KTUI_SSH_CONFIG)")
    check.add_argument("--remote-python", default="python3", metavar="PYTHON", help=REMOTE_PYTHON_HELP)
    check.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.dispatch.remote.address import parse_remote
    from ktui.dispatch.remote.check import check_lines, needed_to_run, probe
    from ktui.dispatch.remote.link import Link, LinkDown

    try:
        address = parse_remote(args.host)
        link = Link(address, args.ssh_config)
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        found = probe(link, args.remote_python)
    except (LinkDown, RuntimeError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        link.close()
    lines = check_lines(found, address.display, args.remote_python)
    print(f"{address.display}:")
    for line in lines:
        print(f"  {line}")
    runnable = all(line.ok for line in lines if line.name in needed_to_run())
    return EXIT_OK if runnable else EXIT_CANNOT_RUN
