"""``ktui audit``: does a problem's test tell a right kernel from a trivial one?

    ktui audit PATH...              references, kernels (their reference), GPU MODE problem folders
    ktui audit --reference PROBLEM  a KernelBench problem file or any reference, no kernel needed

One line per check, then the verdict: ``strong``, or ``weak`` with every reason. ``--json`` prints
the events as ``ktui run --json`` does. Exit codes: 0 every reference strong, 4 one is weak, 2 one
could not be audited (bad path, a reference that raises or hangs).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ktui.cli.commands import COMMANDS
from ktui.cli.exits import EXIT_CANNOT_RUN, EXIT_OK, EXIT_UNTRUSTED
from ktui.cli.options import add_state_dir, add_step_timeout, add_target_flags
from ktui.cli.printers import JsonPrinter

EXIT_WEAK = EXIT_UNTRUSTED  # a reference's test is weak: a trivial kernel would pass it


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "audit", help=COMMANDS["audit"],
        description="Judge trivial kernels (zeros, a copy of an input, the answer in bf16, a replayed answer…) "
                    "exactly as a kernel is judged, and check the reference itself (reproducible, moved by its "
                    "seed and by every input). The verdict is cached per reference version in .ktui/.")
    parser.add_argument("paths", nargs="*", type=Path,
                        help="references, kernels (their reference is audited), GPU MODE problem folders, "
                             "workspaces or folders of problems")
    parser.add_argument("--reference", type=Path, default=None, metavar="PROBLEM.py",
                        help="audit this reference (a KernelBench problem file, a GPU MODE reference.py or a ktui "
                             "reference); with PATHs, the reference they are judged against")
    parser.add_argument("--json", action="store_true", help="print the audit's events as JSON lines")
    add_target_flags(parser)
    parser.add_argument("--seed", type=int, default=None, help="base seed (default: fresh seeds)")
    add_step_timeout(parser, "each step: drawing one shape's inputs, judging one mutant", None, "120")
    parser.add_argument("--shapes", type=int, default=None, metavar="N",
                        help="audit only the first N test shapes (KernelBench: trials)")
    parser.add_argument("--fresh", action="store_true", help="audit again even if a cached verdict exists")
    add_state_dir(parser)
    parser.set_defaults(handler=cmd_audit)


def cmd_audit(args: argparse.Namespace) -> int:
    # deferred for start-up speed
    from ktui.dispatch.auditor import DEFAULT_STEP_TIMEOUT_S, AuditOptions, Auditor, find_targets
    from ktui.dispatch.owner import OwnerGone, gpu_turn_for
    from ktui.workspace.kernels import ProblemError

    if not args.paths and args.reference is None:
        print("ktui: audit what? name references, kernels or problem folders, or --reference PROBLEM",
              file=sys.stderr)
        return EXIT_CANNOT_RUN
    for value, flag in ((args.timeout, "--timeout"), (args.shapes, "--shapes")):
        if value is not None and value <= 0:
            print(f"ktui: {flag} must be positive, got {value:g}", file=sys.stderr)
            return EXIT_CANNOT_RUN
    try:
        targets = find_targets(args.paths, args.reference)
    except ProblemError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    options = AuditOptions(arch=args.arch, force_cpu=args.cpu, seed=args.seed, shapes=args.shapes,
                           step_timeout_s=args.timeout or DEFAULT_STEP_TIMEOUT_S, fresh=args.fresh)
    printer = JsonPrinter() if args.json else AuditPrinter()
    auditor = Auditor(options)
    # The audit's processes take their turn on the workspace owner's GPU: never beside a timed run.
    first = args.paths[0] if args.paths else args.reference
    try:
        with gpu_turn_for(first, f"ktui audit {first}"):
            return _audited(targets, auditor, printer)
    except OwnerGone as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN


def _audited(targets, auditor, printer) -> int:
    from ktui.dispatch.worker_protocol import WorkerStartError  # deferred for start-up speed
    from ktui.workspace.kernels import ProblemError

    verdicts = []
    try:
        for target in targets:
            verdict = "error"
            try:
                for event in auditor.audit(target):
                    printer(event)
                    if event.type == "run_finished":
                        verdict = event.verdict
                if auditor.not_cached:
                    print(f"ktui: {target.name}: the verdict is not cached: {auditor.not_cached}", file=sys.stderr)
            except ProblemError as exc:
                print(f"ktui: {exc}", file=sys.stderr)
            verdicts.append(verdict)
    except WorkerStartError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        auditor.close()
    return exit_code(verdicts)


def exit_code(verdicts: list[str]) -> int:
    if any(v not in ("strong", "weak") for v in verdicts):
        return EXIT_CANNOT_RUN
    return EXIT_WEAK if "weak" in verdicts else EXIT_OK


class AuditPrinter:
    """A header per reference, one line per check, the verdict with its reasons and notes."""

    def __init__(self) -> None:
        self._started = None

    def __call__(self, event) -> None:
        # deferred for start-up speed
        from ktui.protocol.events import RunFinished, RungFinished, RunStarted
        from ktui.protocol.lines import rung_line

        if isinstance(event, RunStarted):
            self._started = event
            print(f"== audit {event.kernel} ({os.path.relpath(event.reference)}) · {event.tier} · {event.device}",
                  flush=True)
        elif isinstance(event, RungFinished):
            print(rung_line(event.to_json()), flush=True)
        elif isinstance(event, RunFinished):
            print("\n".join(verdict_lines(self._started.kernel if self._started else "?", event)), flush=True)


def verdict_lines(name: str, event) -> list[str]:
    summary = event.summary or {}
    cached = summary.get("cached")
    when = ""
    if cached and isinstance(cached.get("audited"), (int, float)):
        from datetime import datetime  # deferred for start-up speed

        when = f" · cached from {datetime.fromtimestamp(cached['audited']).strftime('%Y-%m-%d %H:%M')} (--fresh audits again)"
    if event.verdict == "error":
        return [f"{name}: could not audit · {event.message.splitlines()[0] if event.message else 'no reason given'}"]
    shapes = summary.get("shapes") or []
    lines = [f"{name}: {event.verdict} · {summary.get('checks', 0)} checks on {len(shapes)} test shape(s) · "
             f"{event.duration_s:.1f} s{when}"]
    lines += [f"  weak: {reason}" for reason in summary.get("reasons", [])]
    if summary.get("also"):
        lines.append(f"  also passing for the same cause: {', '.join(summary['also'])}")
    lines += [f"  note: {note}" for note in summary.get("partial", [])]
    lines += [f"  ktui's fresh seeds: {reason}" for reason in summary.get("fresh_seeds", [])]
    if summary.get("fresh_seeds_also"):
        lines.append(f"  also only on ktui's fresh seeds, for the same cause: {', '.join(summary['fresh_seeds_also'])}")
    return lines
