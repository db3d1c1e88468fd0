"""``ktui``: arguments in, calls out. Each command is a module of ``ktui.cli`` with
``add_parser(subparsers)``, which adds its subparser and sets ``handler`` (the function that runs
it, returning the exit status); ``ktui.cli.commands`` names them with their one-line summaries, in the order
``ktui --help`` lists them. Only the module of the command that runs is imported: ``ktui --help``
and ``ktui history`` do not pay for what ``ktui watch`` or ``ktui calibrate`` import.

Exit codes (``ktui.cli.exits``): 0 every rung that ran passed; 1 a rung failed (or a run crashed /
timed out / was cancelled); 2 ktui could not run (bad path, no reference, the reference raised, bad
arguments); 3 a kernel is suspicious; 4 (``ktui run --strict``) a pass that cannot be trusted; 128 + N
stopped by signal N (130 for Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
from importlib import import_module
from typing import Iterable

import ktui
from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, exit_stopped
from ktui.cli.options import use_state_dir
from ktui.cli.terminal import shown_before_parsing, shown_for
from ktui.protocol.statedir import StateError


def build_parser(loaded: Iterable[str] = COMMANDS) -> argparse.ArgumentParser:
    """Every command listed with its summary; the arguments and handler of those in ``loaded``
    only, each from its module (the others stay bare entries: their modules are not imported)."""
    parser = argparse.ArgumentParser(prog="ktui", description="Verify, time and inspect GPU kernels.")
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print ktui's version, the Python running it and where ktui is installed, and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    loaded = set(loaded)
    for command, summary in COMMANDS.items():
        if command in loaded:
            import_module(f"ktui.cli.{command}").add_parser(sub)
        else:
            sub.add_parser(command, help=summary)
    return parser


def version_text() -> str:
    """``ktui 0.1.0 (Python 3.11.9, /home/me/ktui/ktui)``: what a bug report needs first."""
    return f"ktui {ktui.__version__} (Python {platform.python_version()}, {os.path.dirname(ktui.__file__)})"


def main(argv: list[str] | None = None, runners=None) -> int:
    """Run one command; ``runners`` (a ``ktui.dispatch.placement.RunnerSource``) gives its runs
    workers of the caller's own: the seam tests run the CLI in-process through."""
    argv = sys.argv[1:] if argv is None else argv
    # ktui's own options are only -h/--help and --version: the first other word is the command, if any.
    command = next((word for word in argv if not word.startswith("-")), None)
    streams = sys.stdout, sys.stderr
    try:
        shown_before_parsing()
        if not argv:  # a bare ``ktui``: what it can do, not only that a command is missing
            build_parser().print_help()
            return EXIT_CANNOT_RUN
        args = build_parser([command] if command in COMMANDS else []).parse_args(argv)
        shown_for(args)
        use_state_dir(args)
        args.runners = runners
        return args.handler(args)
    except StateError as exc:  # the history cannot be used: said in one line, naming the file
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    except KeyboardInterrupt:
        return exit_stopped(signal.SIGINT)
    except BrokenPipeError:
        return reader_went_away()
    finally:
        sys.stdout, sys.stderr = streams


def reader_went_away() -> int:
    """The reader of stdout closed it (``ktui history K | head -1``): stop quietly, as ``head``'s
    writers do. Whatever the command started was stopped by its own ``finally`` on the way here;
    stdout now points at devnull so the interpreter's last flush cannot fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
