"""``ktui``: arguments in, calls out. The logic lives in the modules it calls.

Exit codes: 0 every rung that ran passed; 1 a rung failed (or a run crashed / timed out);
2 ktui could not run (bad path, no reference, bad arguments); 3 a kernel is suspicious.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2
EXIT_SUSPICIOUS = 3


def _timeouts(values: list[str]) -> dict[str, float]:
    out = {}
    for value in values or []:
        name, _, seconds = value.partition("=")
        try:
            out[name.strip()] = float(seconds)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--timeout expects RUNG=SECONDS, got {value!r}") from None
    return out


def add_reference(parser: argparse.ArgumentParser) -> None:
    """``--reference``, one meaning for every command that takes a kernel path (see ``kernel_for``)."""
    parser.add_argument("--reference", type=Path, default=None, metavar="PROBLEM.py",
                        help="judge the kernel(s) named against this reference (a KernelBench problem file, "
                             "a GPU MODE reference.py or a ktui reference), as `ktui run --reference` does")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ktui", description="Verify, time and inspect GPU kernels.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the loop once on kernel files or folders")
    run.add_argument("paths", nargs="+", type=Path)
    add_reference(run)
    run.add_argument("--json", action="store_true", help="print the loop's events as JSON lines")
    run.add_argument("--arch", default=None, help="target architecture without a local GPU (default sm_90a)")
    run.add_argument("--cpu", action="store_true", help="use the CPU tier even where a GPU exists")
    run.add_argument("--no-bench", action="store_true", help="skip the benchmark rungs")
    run.add_argument("--seed", type=int, default=None, help="base seed (default: fresh seeds every run)")
    run.add_argument("--timeout", action="append", metavar="RUNG=SECONDS",
                     help="per-rung time limit, e.g. --timeout correctness=30 (repeatable)")
    run.add_argument("--cold", action="store_true", help="a fresh worker process for every kernel")
    run.add_argument("--strict", action="store_true",
                     help="the final word: a fresh process per run, more seeds per shape, every timed output re-checked")
    run.add_argument("-v", "--verbose", action="store_true", help="also print what the kernel printed")
    bench = run.add_argument_group("benchmark (GPU tier)")
    bench.add_argument("--hot-cache", action="store_true",
                       help="time with inputs in L2: no flush between samples, one input set")
    bench.add_argument("--cuda-graph", action="store_true",
                       help="also time CUDA-graph replays (no launch overhead), reported as graph_* figures")
    bench.add_argument("--bench-time", type=float, metavar="S", help="cap on sampling time per shape (default 3)")
    bench.add_argument("--warmup", type=float, metavar="S", help="warm-up time per shape (default 0.2)")
    bench.add_argument("--rse-target", type=float, metavar="F",
                       help="stop when each median's relative standard error is below F (default 0.005 = 0.5%%)")
    bench.add_argument("--min-samples", type=int, metavar="N", help="samples per callable before any stop (default 20)")
    bench.add_argument("--input-sets", type=int, metavar="N", help="input sets rotated between samples (default 3)")
    bench.add_argument("--flush", choices=("read", "write"), help="how the L2 is evicted between samples (default read)")
    bench.add_argument("--roofline-done", type=float, metavar="F",
                       help="fraction of roofline shown as 'at roofline' (default 0.9)")

    cal = sub.add_parser("calibrate", help="measure this GPU's copy bandwidth and matmul rates for the roofline")
    cal.add_argument("path", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    cal.add_argument("--json", action="store_true", help="print the calibration as JSON")
    cal.add_argument("--time", type=float, default=2.0, metavar="S", help="sampling cap per measurement (default 2)")

    watch = sub.add_parser("watch", help="watch a workspace and re-run the loop on every save (the dashboard)")
    watch.add_argument("dir", nargs="?", type=Path, default=Path("."),
                       help="the workspace, its kernels/ folder, or a folder of kernels (default: .)")
    watch.add_argument("--headless", action="store_true", help="no UI: print the loop's events as JSON lines")
    watch.add_argument("--arch", default=None, help="target architecture without a local GPU (default sm_90a)")
    watch.add_argument("--cpu", action="store_true", help="use the CPU tier even where a GPU exists")
    watch.add_argument("--no-bench", action="store_true", help="skip the benchmark rungs")
    watch.add_argument("--seed", type=int, default=None, help="base seed (default: fresh seeds every run)")
    watch.add_argument("--timeout", action="append", metavar="RUNG=SECONDS", help="per-rung time limit (repeatable)")
    watch.add_argument("--debounce-ms", type=float, default=150.0,
                       help="quiet time after the last file event before a save counts (default 150)")
    watch.add_argument("--poll", action="store_true", help="poll the file system instead of using inotify")
    watch.add_argument("--lazy", action="store_true",
                       help="do not run kernels at start whose stored results are stale; mark them stale")
    watch.add_argument("--strict", action="store_true",
                       help="start in strict mode (key s toggles it): fresh process, more seeds, every timed output re-checked")
    watch.add_argument("-v", "--verbose", action="store_true", help="headless: also print what kernels printed")

    init = sub.add_parser("init", help="create a workspace: kernels/, references/, context/, AGENTS.md")
    init.add_argument("dir", nargs="?", type=Path, default=Path("."))
    init.add_argument("--force", action="store_true", help="overwrite files that already exist")

    ctx = sub.add_parser("context", help="material for agents in context/: add sources, search them")
    ctx_sub = ctx.add_subparsers(dest="context_command", required=True)
    add = ctx_sub.add_parser("add", help="add a source: triton, cutedsl (offline); cutlass, triton-tutorials, ptx (network)")
    add.add_argument("source")
    add.add_argument("--url", default=None, help="fetch from here instead (a git URL, or the PTX page's URL / file)")
    add.add_argument("--timeout", type=float, default=None, help="seconds before a network fetch gives up")
    add.add_argument("--dir", type=Path, default=None, help="the context folder (default: <workspace>/context)")
    search = ctx_sub.add_parser("search", help="ranked full-text search: prints path:line and a snippet")
    search.add_argument("query", nargs="+")
    search.add_argument("--json", action="store_true", help="one JSON object per match")
    search.add_argument("--limit", type=int, default=20)
    search.add_argument("--dir", type=Path, default=None, help="the context folder (default: <workspace>/context)")

    hist = sub.add_parser("history", help="list the stored versions of a kernel")
    hist.add_argument("path", type=Path)
    add_reference(hist)
    hist.add_argument("--json", action="store_true")
    hist.add_argument("--limit", type=int, default=50)

    diff = sub.add_parser("diff", help="SASS diff of a kernel's version against an earlier one")
    diff.add_argument("path", type=Path)
    add_reference(diff)
    diff.add_argument("--base", default="previous", metavar="previous|best|pinned|N",
                      help="what to compare with: the latest earlier passing version (default), the fastest "
                           "passing version, the pinned baseline, or a version number")
    diff.add_argument("--version", type=int, default=None,
                      help="the version to inspect (default: the file's current content, else the newest run)")
    diff.add_argument("--json", action="store_true", help="one JSON object for agents")
    diff.add_argument("--context", type=int, default=3, help="lines of context in the unified diff")
    diff.add_argument("--no-unified", action="store_true", help="only the opcode and resource deltas")

    pin = sub.add_parser("pin", help="pin a version of a kernel as its diff baseline")
    pin.add_argument("path", type=Path)
    add_reference(pin)
    pin.add_argument("version", type=int, nargs="?", default=None, help="default: the file's current version")
    pin.add_argument("--clear", action="store_true", help="remove the pinned baseline")

    prof = sub.add_parser("profile", help="profile a kernel on one benchmark shape with Nsight Compute (GPU)")
    prof.add_argument("path", type=Path)
    add_reference(prof)
    prof.add_argument("--json", action="store_true", help="progress and result as JSON lines")
    prof.add_argument("--set", default="basic", help="basic (default: the summary's sections) or an ncu set, e.g. full")
    prof.add_argument("--shape", type=int, default=0, help="index into the reference's BENCHMARKS (default 0)")
    prof.add_argument("--clock-control", choices=("none", "base"), default="none",
                      help="none (default): the clocks the benchmark sees; base: ncu locks base clocks")
    prof.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS", help="limit for the profile (600)")
    prof.add_argument("--warmup", type=int, default=2, help="unprofiled calls before the profiled one")
    prof.add_argument("--sections", action="store_true",
                      help="time the Proton scopes (triton.profiler.language) inside a Triton kernel instead")

    san = sub.add_parser("sanitize", help="run a kernel's first test shape under compute-sanitizer (GPU)")
    san.add_argument("path", type=Path)
    add_reference(san)
    san.add_argument("--tool", choices=("memcheck", "racecheck", "initcheck", "synccheck"), default="memcheck")
    san.add_argument("--json", action="store_true")
    san.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS")

    mcp = sub.add_parser("mcp", help="serve the loop to coding agents over MCP (stdio); needs the [mcp] extra")
    mcp.add_argument("dir", nargs="?", type=Path, default=Path("."), help="the workspace (default: here)")
    mcp.add_argument("--arch", default=None, help="target architecture without a local GPU (default sm_90a)")
    mcp.add_argument("--cpu", action="store_true", help="use the CPU tier even where a GPU exists")
    mcp.add_argument("--timeout", action="append", metavar="RUNG=SECONDS", help="per-rung time limit (repeatable)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = {
        "run": cmd_run,
        "history": cmd_history,
        "diff": cmd_diff,
        "pin": cmd_pin,
        "profile": cmd_profile,
        "sanitize": cmd_sanitize,
        "calibrate": cmd_calibrate,
        "init": cmd_init,
        "context": cmd_context,
        "watch": cmd_watch,
        "mcp": cmd_mcp,
    }[args.command]
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return reader_went_away()


def reader_went_away() -> int:
    """The reader of stdout closed it (``ktui history K | head -1``): stop quietly, as ``head``'s
    writers do. Whatever the command started was stopped by its own ``finally`` on the way here;
    stdout now points at devnull so the interpreter's last flush cannot fail a second time."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_FAILED


def cmd_run(args: argparse.Namespace) -> int:
    from ktui.protocol.job import Options
    from ktui.run.runner import LocalRunner, WorkerConfig, WorkerStartError
    from ktui.run.session import Session
    from ktui.workspace.kernels import ProblemError, discover

    try:
        kernels = discover(args.paths, reference=args.reference)
        timeouts = _timeouts(args.timeout)
        bench = bench_settings(args)
    except (ProblemError, argparse.ArgumentTypeError, ValueError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    options = Options(arch=args.arch, force_cpu=args.cpu, benchmark=not args.no_bench, seed=args.seed,
                      timeouts=timeouts, strict=args.strict, bench=bench)
    printer = JsonPrinter() if args.json else LinePrinter(verbose=args.verbose)
    verdicts = []
    runner = LocalRunner(WorkerConfig(arch=args.arch, force_cpu=args.cpu), fresh_each_run=args.cold)
    sessions: dict[Path, Session] = {}
    try:
        for kernel in kernels:
            session = sessions.get(kernel.root)
            if session is None:
                session = sessions[kernel.root] = Session(kernel.root, runner=runner, consumers=[printer])
            verdicts.append(session.run(kernel, options).verdict)
    except WorkerStartError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    finally:
        for session in sessions.values():
            session.close()
    return exit_code(verdicts)


# ``ktui run`` flag → BenchSettings field.
BENCH_FLAGS = {
    "hot_cache": "hot_cache", "cuda_graph": "cuda_graph", "bench_time": "time_s", "warmup": "warmup_s",
    "rse_target": "rse_target", "min_samples": "min_samples", "input_sets": "input_sets", "flush": "flush",
    "roofline_done": "roofline_done",
}


def bench_settings(args: argparse.Namespace) -> dict:
    """The benchmark flags that were given, as ``Options.bench``; validated here so a bad value
    stops ``ktui run`` before any worker starts (ValueError with the flag's meaning)."""
    from ktui.protocol.job import BenchSettings

    given = {field: getattr(args, flag) for flag, field in BENCH_FLAGS.items()
             if getattr(args, flag) not in (None, False)}
    BenchSettings.from_dict(given)
    return given


def cmd_calibrate(args: argparse.Namespace) -> int:
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
    import torch

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


def exit_code(verdicts: list[str]) -> int:
    if "error" in verdicts:
        return EXIT_CANNOT_RUN
    if "suspicious" in verdicts:
        return EXIT_SUSPICIOUS
    if any(v != "passed" for v in verdicts):
        return EXIT_FAILED
    return EXIT_OK


class JsonPrinter:
    """``--json``: every event as one JSON line, flushed, so an agent can follow it live."""

    def __call__(self, event) -> None:
        sys.stdout.write(event.dumps() + "\n")
        sys.stdout.flush()


class LinePrinter:
    """Plain lines: a header per kernel, one line per rung, one summary line per kernel."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose
        self._started = {}

    def __call__(self, event) -> None:
        from ktui.protocol.events import Output, RunFinished, RungFinished, RunStarted
        from ktui.run.render import rung_line, summary_line

        if isinstance(event, RunStarted):
            self._started[event.run_id] = event
            where = f"{event.tier} · {event.device} · {event.arch}" if event.tier != "-" else "not run"
            ref = os.path.relpath(event.reference) if event.reference else "no reference"
            print(f"== {event.kernel} v{event.version} ({os.path.relpath(event.path)} → {ref}) · {where}", flush=True)
        elif isinstance(event, RungFinished):
            print(rung_line(event.to_json()), flush=True)
        elif isinstance(event, Output) and self.verbose:
            print(f"   | {event.text}", flush=True)
        elif isinstance(event, RunFinished):
            start = self._started.pop(event.run_id, None)
            if start is None:
                return
            print(summary_line(start.kernel, start.version, event.verdict, event.summary, start.tier, start.arch,
                               event.duration_s, event.message), flush=True)


def cmd_watch(args: argparse.Namespace) -> int:
    from ktui.protocol.job import Options
    from ktui.watch.loop import WatchLoop, WatchSettings
    from ktui.workspace.folder import Workspace
    from ktui.workspace.kernels import ProblemError

    try:
        workspace = Workspace.at(args.dir)
        timeouts = _timeouts(args.timeout)
    except (ProblemError, argparse.ArgumentTypeError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if args.debounce_ms < 0:
        print("ktui: --debounce-ms must be 0 or more", file=sys.stderr)
        return EXIT_CANNOT_RUN
    options = Options(arch=args.arch, force_cpu=args.cpu, benchmark=not args.no_bench, seed=args.seed, timeouts=timeouts,
                      strict=args.strict)
    settings = WatchSettings(debounce_s=args.debounce_ms / 1000.0, force_polling=args.poll, catch_up=not args.lazy)
    if args.headless:
        from ktui.watch import headless

        printer = headless.JsonLines(with_output=args.verbose)
        return headless.run(WatchLoop(workspace, options, printer, settings), printer)
    from ktui.tui.app import run_dashboard

    return run_dashboard(workspace, options, settings)


def cmd_mcp(args: argparse.Namespace) -> int:
    from ktui.run.runner import WorkerConfig
    from ktui.workspace.kernels import ProblemError

    try:
        from ktui.agents.server import serve
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith("mcp"):
            raise
        print("ktui: `ktui mcp` needs the MCP SDK: python3 -m pip install -e '.[mcp]' (or pip install 'mcp>=2.3')",
              file=sys.stderr)
        return EXIT_CANNOT_RUN
    try:
        timeouts = _timeouts(args.timeout)
        return serve(args.dir, WorkerConfig(arch=args.arch, force_cpu=args.cpu), timeouts)
    except (ProblemError, argparse.ArgumentTypeError) as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN


def cmd_init(args: argparse.Namespace) -> int:
    from ktui.workspace.scaffold import init_workspace

    try:
        result = init_workspace(args.dir, force=args.force)
    except OSError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN
    if result.conflicts:
        print(f"ktui: {result.root} already has {', '.join(result.conflicts)}; nothing was written "
              "(--force overwrites them)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    for rel in result.written:
        print(f"  wrote {rel}")
    print(f"  .gitignore: {result.gitignore}")
    where = os.path.relpath(result.root)
    print(f"workspace ready in {where}. Next: cd {where} && ktui run kernels/   (agents: read AGENTS.md)")
    return EXIT_OK


def context_dir(given: Path | None) -> Path:
    """``--dir``, else ``context/`` of the workspace around the current folder (or of the current folder)."""
    from ktui.workspace.kernels import find_root

    if given is not None:
        return given
    cwd = Path.cwd()
    return find_root(cwd, fallback=cwd) / "context"


def cmd_context(args: argparse.Namespace) -> int:
    folder = context_dir(args.dir)
    if args.context_command == "add":
        from ktui.agentdocs.sources import ContextError, add_source

        try:
            added = add_source(args.source, folder, url=args.url, timeout=args.timeout)
        except ContextError as exc:
            print(f"ktui: {exc}", file=sys.stderr)
            return EXIT_CANNOT_RUN
        print(f"{os.path.relpath(added.folder)}: {added.files} files, {added.bytes / 2**20:.1f} MiB · {added.version}")
        for note in added.notes:
            print(f"  {note}")
        return EXIT_OK

    from ktui.agentdocs.index import search

    if not folder.is_dir():
        print(f"ktui: {folder} does not exist: fill it with `ktui context add triton` (or cutedsl, cutlass, "
              "triton-tutorials, ptx)", file=sys.stderr)
        return EXIT_CANNOT_RUN
    hits, _ = search(folder, " ".join(args.query), limit=args.limit)
    for hit in hits:
        if args.json:
            record = hit.to_json()
            record["file"] = str(folder / hit.path)
            print(json.dumps(record))
        else:
            print(f"{os.path.relpath(folder / hit.path)}:{hit.line}: {hit.snippet}")
    if not hits and not args.json:
        print(f"no match for {' '.join(args.query)!r} in {os.path.relpath(folder)}", file=sys.stderr)
    return EXIT_OK if hits else EXIT_FAILED


def cmd_history(args: argparse.Namespace) -> int:
    from ktui.history.store import Store
    from ktui.run.render import summary_line
    from ktui.workspace.kernels import state_dir

    kernel = _stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    store = Store.of(state_dir(kernel.root))
    runs = store.runs(kernel.id, limit=args.limit)
    if args.json:
        for run in runs:
            record = run.to_json()
            record["rungs"] = store.rungs(run.run_id)
            print(json.dumps(record, default=str))
        return EXIT_OK
    if not runs:
        print(f"{kernel.id}: no runs recorded yet ({_run_hint(args)})")
        return EXIT_OK
    from datetime import datetime

    for run in runs:
        when = datetime.fromtimestamp(run.started).strftime("%Y-%m-%d %H:%M:%S")
        print(f"{when}  " + summary_line(run.kernel, run.version, run.verdict, run.summary, run.tier, run.arch,
                                         run.duration_s or 0.0, run.message))
    return EXIT_OK


def _stored_kernel(args: argparse.Namespace):
    """The kernel at ``args.path`` (with ``--reference``) for the commands that read its history,
    resolved as ``ktui run`` resolves it so they find the same ``.ktui/``; None after saying why."""
    from ktui.workspace.kernels import ProblemError, kernel_for

    try:
        return kernel_for(args.path, args.reference)
    except ProblemError as exc:
        print(f"ktui: {exc}", file=sys.stderr)
        return None


def _run_hint(args: argparse.Namespace) -> str:
    """The ``ktui run`` command that records what a history command found missing."""
    reference = f" --reference {args.reference}" if args.reference is not None else ""
    return f"ktui run {args.path}{reference}"


def cmd_diff(args: argparse.Namespace) -> int:
    from ktui.history.sassdiff import DiffError, diff_versions, resolve_base
    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir
    from ktui.workspace.versions import current_version

    kernel = _stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    state = state_dir(kernel.root)
    store = Store.of(state)
    try:
        new, note = (args.version, "") if args.version is not None else current_version(store, kernel)
        if new is None:
            raise DiffError(f"{kernel.id} has no stored versions yet: run `{_run_hint(args)}` first")
        base = resolve_base(store, kernel.id, new, args.base)
        diff = diff_versions(state, kernel.id, base, new, context=max(0, args.context))
    except DiffError as exc:
        if args.json:
            print(json.dumps({"kernel": kernel.id, "base": args.base, "error": str(exc)}))
        else:
            print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        store.close()
    if args.json:
        print(json.dumps({**diff.to_json(), "base": args.base, "note": note}))
        return EXIT_OK
    if note:
        print(f"note: {note}", file=sys.stderr)
    print(diff.text(unified=not args.no_unified))
    return EXIT_OK


def cmd_pin(args: argparse.Namespace) -> int:
    from ktui.history.store import Store
    from ktui.workspace.kernels import state_dir
    from ktui.workspace.versions import current_version

    kernel = _stored_kernel(args)
    if kernel is None:
        return EXIT_CANNOT_RUN
    store = Store.of(state_dir(kernel.root))
    try:
        if args.clear:
            store.unpin(kernel.id)
            print(f"{kernel.id}: no pinned baseline")
            return EXIT_OK
        version = args.version if args.version is not None else current_version(store, kernel)[0]
        known = [v for v, _ in store.iter_versions(kernel.id)]
        if version is None or version not in known:
            what = f"no version {version}" if version is not None else "no stored versions"
            print(f"ktui: {kernel.id} has {what}: run `{_run_hint(args)}` first", file=sys.stderr)
            return EXIT_FAILED
        store.pin(kernel.id, version)
        print(f"{kernel.id}: v{version} pinned as the diff baseline")
        return EXIT_OK
    finally:
        store.close()


def cmd_profile(args: argparse.Namespace) -> int:
    """Profile, or time sections; ``--json`` prints the contract the dashboard's ``p`` reads."""
    from ktui.inspect.external import CannotRun, ToolFailed
    from ktui.inspect.profile import ProfileOptions, profile, profile_sections

    def emit(obj: dict) -> None:
        sys.stdout.write(json.dumps(obj, default=str) + "\n")
        sys.stdout.flush()

    def progress(message: str) -> None:
        if args.json:
            emit({"type": "profile_progress", "message": message})
        else:
            print(f"… {message}", file=sys.stderr, flush=True)

    def finish(ok: bool, message: str, summary: dict | None = None, **extra) -> None:
        if args.json:
            emit({"type": "profile_finished", "ok": ok, "message": message, "summary": summary, **extra})
        elif not ok:
            print(f"ktui: {message}", file=sys.stderr)

    options = ProfileOptions(set=args.set, shape=args.shape, clock_control=args.clock_control,
                             timeout_s=args.timeout, warmup=args.warmup)
    try:
        if args.sections:
            report = profile_sections(args.path, options, progress, reference=args.reference)
            finish(True, f"{len(report.sections)} section(s) timed", None, sections=report.to_json())
            if not args.json:
                print(report.text())
        else:
            summary = profile(args.path, options, progress, reference=args.reference)
            finish(True, f"profiled {len(summary.kernels)} kernel(s), {summary.total_duration_us:.1f} µs in total",
                   summary.to_json())
            if not args.json:
                print(summary.text())
    except CannotRun as exc:
        finish(False, str(exc))
        return EXIT_CANNOT_RUN
    except ToolFailed as exc:
        finish(False, str(exc))
        return EXIT_FAILED
    except Exception as exc:
        finish(False, f"ktui profile failed unexpectedly: {type(exc).__name__}: {exc}")
        return EXIT_FAILED
    return EXIT_OK


def cmd_sanitize(args: argparse.Namespace) -> int:
    from ktui.inspect.external import CannotRun, ToolFailed
    from ktui.inspect.sanitize import sanitize

    def progress(message: str) -> None:
        if not args.json:
            print(f"… {message}", file=sys.stderr, flush=True)

    try:
        report = sanitize(args.path, tool=args.tool, timeout_s=args.timeout, progress=progress,
                          reference=args.reference)
    except (CannotRun, ToolFailed) as exc:
        if args.json:
            print(json.dumps({"ok": False, "message": str(exc), "report": None}))
        else:
            print(f"ktui: {exc}", file=sys.stderr)
        return EXIT_CANNOT_RUN if isinstance(exc, CannotRun) else EXIT_FAILED
    if args.json:
        print(json.dumps({"ok": report.clean, "message": "no errors" if report.clean else
                          f"{report.error_count} error(s)", "report": report.to_json()}))
    else:
        print(report.text())
    return EXIT_OK if report.clean else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
