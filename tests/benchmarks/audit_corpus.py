"""``ktui audit`` over public corpora: how many problems' tests a trivial kernel passes, and which.

Run by hand on a GPU machine, from the repository root, on checkouts kept outside the repository's
tracked files (never copied in):

    python3 tests/benchmarks/audit_corpus.py --kernelbench .corpora/kernelbench/KernelBench/level1 \\
        --gpumode .corpora/gpumode/problems/pmpp_v2 [--shapes 2] [--limit N] [--only 19_ReLU] [--out rows.json]

Every KernelBench problem file and every GPU MODE problem folder is audited in one warm audit
process (``ktui.dispatch.auditor.Auditor``), with nothing cached or written into the checkouts. Reduced
repetitions, not reduced sizes: ``--shapes`` audits the first N test shapes (KernelBench's 5
trials become N; GPU MODE problems keep all of theirs unless ``--gpumode-shapes`` says otherwise).
It prints one markdown row per problem — its verdict, the mutants and checks that pass, the
audit's time — then the summary for the README: how many are weak, by which mutant, the slowest
problem, the device and the date.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ktui.dispatch.auditor import AuditOptions, Auditor, find_targets  # noqa: E402
from ktui.protocol.events import RunFinished, RunStarted  # noqa: E402
from ktui.workspace.kernels import ProblemError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, help="KernelBench's level1/ folder")
    parser.add_argument("--gpumode", type=Path, help="a GPU MODE problem collection (problems/pmpp_v2)")
    parser.add_argument("--shapes", type=int, default=2, help="KernelBench: trials audited (default 2 of 5)")
    parser.add_argument("--gpumode-shapes", type=int, default=None, help="GPU MODE: test shapes audited (default all)")
    parser.add_argument("--limit", type=int, default=None, help="at most N problems per corpus (a smoke test)")
    parser.add_argument("--only", action="append", default=[], help="problems whose name contains this (repeatable)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one audit step may take")
    parser.add_argument("--cpu", action="store_true", help="the CPU tier (a smoke test of this script)")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    corpora = [(name, folder, shapes) for name, folder, shapes in
               (("KernelBench level 1", args.kernelbench, args.shapes), ("GPU MODE pmpp_v2", args.gpumode,
                                                                           args.gpumode_shapes)) if folder]
    if not corpora:
        parser.error("name at least one corpus: --kernelbench DIR and/or --gpumode DIR")
    rows, device = [], ""
    for corpus, folder, shapes in corpora:
        try:
            targets = find_targets([folder])
        except ProblemError as exc:
            print(f"{corpus}: {exc}", file=sys.stderr)
            return 2
        targets = [t for t in sorted(targets, key=lambda t: _order(t.name))
                   if not args.only or any(o in t.name for o in args.only)][: args.limit]
        auditor = Auditor(AuditOptions(force_cpu=args.cpu, step_timeout_s=args.timeout, shapes=shapes, cache=False))
        try:
            for target in targets:
                row, device = audit_one(auditor, corpus, target, device)
                rows.append(row)
                print(row_line(row), flush=True)
        finally:
            auditor.close()
    print()
    print("\n".join(summary(rows, device)))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


def audit_one(auditor: Auditor, corpus: str, target, device: str) -> tuple[dict, str]:
    started = time.monotonic()
    finish = None
    try:
        for event in auditor.audit(target):
            if isinstance(event, RunStarted):
                device = device or f"{event.device} ({event.tier})"
            elif isinstance(event, RunFinished):
                finish = event
    except ProblemError as exc:
        return {"corpus": corpus, "problem": target.name, "verdict": "error", "weak": [], "note": str(exc),
                "audit_s": round(time.monotonic() - started, 2)}, device
    summary = finish.summary if finish else {}
    also = summary.get("also", [])  # weak for a cause a reason already names (zeros pass, so half-zeros do)
    return {"corpus": corpus, "problem": target.name, "verdict": finish.verdict if finish else "error",
            "weak": [k for k in summary.get("weak", []) if k not in also], "also": also,
            "reasons": summary.get("reasons", []),
            "note": (finish.message if finish else "no verdict").splitlines()[0] if finish and finish.message else "",
            "audit_s": round(time.monotonic() - started, 2)}, device


def row_line(row: dict) -> str:
    weak = ", ".join(row["weak"]) or "—"
    note = row["note"][:140].replace("|", "\\|")
    return f"| {row['corpus']} | {row['problem']} | {row['verdict']} | {weak} | {row['audit_s']:.1f} s | {note} |"


def summary(rows: list[dict], device: str) -> list[str]:
    lines = [f"ktui audit on {device or '?'}, {datetime.date.today().isoformat()}", "",
             "| corpus | problems | strong | weak | could not audit | weak by (mutant or check: problems) | slowest audit |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for corpus in dict.fromkeys(r["corpus"] for r in rows):
        mine = [r for r in rows if r["corpus"] == corpus]
        counts = collections.Counter(r["verdict"] for r in mine)
        by = collections.Counter(key for r in mine if r["verdict"] == "weak" for key in r["weak"])
        slowest = max(mine, key=lambda r: r["audit_s"])
        by_text = ", ".join(f"{key}: {n}" for key, n in by.most_common()) or "—"
        lines.append(f"| {corpus} | {len(mine)} | {counts['strong']} | {counts['weak']} | "
                     f"{len(mine) - counts['strong'] - counts['weak']} | {by_text} | "
                     f"{slowest['problem']} ({slowest['audit_s']:.1f} s) |")
    return lines


def _order(name: str) -> tuple:
    """KernelBench's ``19_ReLU`` sorts by its number, then by name."""
    head = name.split("_", 1)[0]
    return (int(head), name) if head.isdigit() else (10**9, name)


if __name__ == "__main__":
    sys.exit(main())
