"""``ktui diff``: the SASS diff of a kernel's version against an earlier one, the two versions'
per-line figures side by side (``history/linediff.py``), and their per-shape roofline figures
(fraction of the attainable time, bound, satisfied or not).

The diff itself reads the SASS stored in the local ``.ktui/runs/`` and never needs a GPU. With
``--remote HOST`` one thing goes to the remote: when the file's current content has no SASS here
yet (not run, or never compiled), it is compiled there — a ``ktui run --remote --no-bench`` of
it, whose dumps land in the local run folder — and then diffed here. Stored versions (``--version
N``, or a current content already run) need no remote, and none is contacted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK
from ktui.cli.history import run_hint, stored_kernel
from ktui.cli.options import add_kernel_path, add_reference, add_remote_flags, add_state_dir


def add_parser(subparsers) -> None:
    diff = subparsers.add_parser("diff", help=COMMANDS["diff"])
    add_kernel_path(diff)
    add_reference(diff)
    add_state_dir(diff)
    diff.add_argument("--base", default="previous", metavar="previous|best|pinned|N",
                      help="what to compare with: the latest earlier passing version (default), the fastest "
                           "passing version, the pinned baseline, or a version number")
    diff.add_argument("--version", type=int, default=None,
                      help="the version to inspect (default: the file's current content, else the newest run)")
    diff.add_argument("--json", action="store_true", help="one JSON object for agents")
    diff.add_argument("--context", type=int, default=3, help="lines of context in the unified diff (default 3)")
    diff.add_argument("--no-unified", action="store_true", help="only the opcode and resource deltas")
    diff.add_argument("--arch", default=None, help="with --remote: the architecture a GPU-less remote compiles for "
                                                    "(default sm_90a)")
    add_remote_flags(diff, "when the file's current content has no SASS here yet, compile it on HOST (a `ktui run "
                           "--remote --no-bench` of it, its dumps landing here) before the diff; stored versions "
                           "need no remote")
    diff.set_defaults(handler=cmd_diff)


def cmd_diff(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.history import linediff, rooflines
    from ktui.history.sassdiff import DiffError, diff_versions, resolve_base
    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir
    from ktui.workspace.versions import current_version

    kernel = stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    if args.remote is not None and args.version is None:
        failed = compile_remotely_if_needed(args, kernel)
        if failed is not None:
            return failed
    state = state_dir(kernel.root)
    store = Store.of(state)
    try:
        new, note = (args.version, "") if args.version is not None else current_version(store, kernel)
        if new is None:
            raise DiffError(f"{kernel.id} has no stored versions yet: run `{run_hint(args)}` first")
        base = resolve_base(store, kernel.id, new, args.base)
        diff = diff_versions(state, kernel.id, base, new, context=max(0, args.context))
        base_summary = rooflines.version_summary(store, kernel.id, base)
        new_summary = rooflines.version_summary(store, kernel.id, new)
        lines = linediff.compare_versions(state, kernel.id, base, new)
    except DiffError as exc:
        if args.json:
            print(json.dumps({"kernel": kernel.id, "base": args.base, "error": str(exc)}))
        else:
            print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    if args.json:
        roofline = rooflines.comparison(base_summary, new_summary)
        print(json.dumps({**diff.to_json(), "base": args.base, "note": note, "roofline": roofline, "lines": lines}))
        return EXIT_OK
    if note:
        print(f"note: {note}", file=sys.stderr)
    print(diff.text(unified=not args.no_unified))
    if lines is not None:
        print(linediff.text(lines))
    print("\n".join(rooflines.lines(base, base_summary, new, new_summary)))
    return EXIT_OK


def compile_remotely_if_needed(args: argparse.Namespace, kernel) -> int | None:
    """Compile the file's current content on ``--remote`` unless its SASS is already here; None
    to go on with the diff, else the exit code after saying why not."""
    # deferred for start-up speed
    from ktui.cli.options import placement_of
    from ktui.dispatch.placement import place
    from ktui.dispatch.session import Session
    from ktui.history.store import Store
    from ktui.protocol.events import ERROR, INTERRUPTED, RunFinished, RunStarted
    from ktui.protocol.job import Options
    from ktui.protocol.statedir import run_dir
    from ktui.workspace.kernels import content_hash, state_dir

    state = state_dir(kernel.root)
    store = Store.of(state)
    try:
        version = store.version_of_hash(kernel.id, content_hash(kernel.path.read_bytes()))
    finally:
        store.close()
    if version is not None and _has_sass(run_dir(state, kernel.id, version)):
        return None  # stored here: no remote needed
    try:
        runner = place(placement_of(args), root=kernel.root).runner
    except ValueError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    session = Session(kernel.root, runner=runner)
    start = end = None
    try:
        print(f"… compiling {kernel.path.name} on {runner.host} for its SASS", file=sys.stderr, flush=True)
        for event in session.events(session.prepare(kernel, Options(benchmark=False, arch=args.arch))):
            if isinstance(event, RunStarted):
                start = event
            elif isinstance(event, RunFinished):
                end = event
    finally:
        session.close()
    if end is None or end.verdict in (ERROR, INTERRUPTED):
        said = end.message if end is not None else "no result"
        print(f"ktui: {kernel.id} could not be compiled on {runner.host}: {said}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if start is not None and start.tier != "gpu":
        if not _has_sass(Path(start.run_dir)):
            print(f"ktui: {runner.host} has no GPU, and its CPU tier produced no SASS for {kernel.id} "
                  f"({end.verdict}: {end.message or 'no CUBIN'}); SASS of this kernel needs a compile on a GPU: "
                  "give --remote a GPU host", file=sys.stderr)
            return EXIT_CANNOT_RUN
        print(f"note: {runner.host} has no GPU: its CPU tier compiled the SASS ahead of time for {start.arch}",
              file=sys.stderr)
    return None


def _has_sass(folder: Path) -> bool:
    return folder.is_dir() and any(folder.glob("*.sass"))
