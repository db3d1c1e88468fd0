"""ktui's verdicts beside the corpora's own evaluators, on the solutions in tests/benchmarks/corpus/.

Run by hand on a GPU machine, from the repository root:

    python3 tests/benchmarks/corpus_table.py --gpumode .corpora/gpumode/problems/pmpp_v2 \\
        --kernelbench .corpora/kernelbench --out /tmp/corpus_table [--only vectorsum --only 19_ReLU]

For every solution it runs `ktui run ... --json` and the corpus's evaluator, each in its own
process with a time limit, and prints one markdown row: ktui's verdict, theirs, both wall times
and the first failure message. GPU MODE: the problem folder is laid out in a temporary directory
per task.yml's `files:` with the solution as submission.py, and their eval.py runs `test` on
task.yml's `tests:` and `leaderboard` on its `benchmarks:`. KernelBench: their
`eval_kernel_against_ref` runs in a child process (this script with `--kernelbench-child`).
Logs of every run, the table and a JSON copy of the rows land under --out.

Their KernelBench package imports, besides torch and numpy: requests and pydantic (eval.py),
and through `kernelbench/__init__.py` and the `get_gpu_vendor` that eval_kernel_against_ref
imports from `kernelbench.utils`: python-dotenv, tqdm, openai and litellm. On a machine without
them the KernelBench rows say which module is missing; install them offline from carried wheels
(`pip install --no-index --no-deps --find-links WHEELS ...`). litellm's price-list download on
import is switched off with LITELLM_LOCAL_MODEL_COST_MAP.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = Path(__file__).resolve().parent / "corpus"
GPUMODE_TEST_TIMEOUT_S = 180  # task.yml's test_timeout
GPUMODE_RANKED_TIMEOUT_S = 420  # task.yml's ranked_timeout


@dataclasses.dataclass
class Outcome:
    """One tool's result for one solution."""

    verdict: str  # passed / failed / suspicious / crashed / timed_out / error / ...
    note: str = ""  # the first failure message, or a figure worth seeing
    wall_s: float = 0.0
    memory: str = ""  # ktui's peak device memory beside the problem's footprint ("41.9 GB, 2.17×")


@dataclasses.dataclass
class Row:
    corpus: str
    problem: str
    solution: str
    ktui: Outcome
    theirs: list[Outcome]  # GPU MODE: test, leaderboard; KernelBench: eval_kernel_against_ref


@dataclasses.dataclass
class Finished:
    """A child process that ended: its exit code (None when it ran out of time) and output."""

    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float


def run_child(cmd: list[str], *, cwd: Path, timeout_s: float, env: dict[str, str] | None = None,
              pass_fds: tuple[int, ...] = ()) -> Finished:
    """Runs a command in its own process group; at the limit the whole group is killed."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, pass_fds=pass_fds, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = None
    return Finished(code, out, err, time.monotonic() - start)


def first_line(text: str, limit: int = 160) -> str:
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def last_line(text: str) -> str:
    return first_line("\n".join(reversed(text.splitlines())))


# --- ktui -------------------------------------------------------------------------------------


def run_ktui(args: list[str], *, log: Path, timeout_s: float, extra: list[str]) -> Outcome:
    """`python3 -m ktui run ARGS --json`; the verdict and first failure from `run_finished`."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    done = run_child([sys.executable, "-m", "ktui", "run", *args, "--json", *extra],
                     cwd=REPO, timeout_s=timeout_s, env=env)
    log.with_suffix(".ktui.jsonl").write_text(done.stdout)
    log.with_suffix(".ktui.stderr").write_text(done.stderr)
    if done.returncode is None:
        return Outcome("timed_out", f"no verdict within {timeout_s:.0f} s", done.wall_s)
    highest = ""  # the rung whose own peak was the run's
    top = 0.0
    for line in done.stdout.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        rung_peak = (event.get("figures") or {}).get("peak_mem_gb") if event.get("type") == "rung_finished" else None
        if isinstance(rung_peak, (int, float)) and rung_peak > top:
            top, highest = rung_peak, event.get("rung", "")
    for line in reversed(done.stdout.splitlines()):
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("type") == "run_finished":
            failure = (event.get("summary") or {}).get("first_failure") or {}
            note = failure.get("message") or ("" if event["verdict"] == "passed" else event.get("message", ""))
            if failure.get("rung"):
                note = f"{failure['rung']}: {note}"
            cell = memory_cell(event.get("summary") or {})
            return Outcome(event["verdict"], first_line(note), done.wall_s, f"{cell} at {highest}" if cell and highest else cell)
    return Outcome("error", f"exit {done.returncode}, no run_finished: {last_line(done.stderr)}", done.wall_s)


def memory_cell(summary: dict) -> str:
    """The run's peak device memory and its ratio to the problem's footprint, as the summary has them."""
    peak, ratio = summary.get("peak_mem_gb"), summary.get("mem_ratio")
    if peak is None:
        return ""
    return f"{peak:.3g} GB, {ratio:.2f}×" if isinstance(ratio, (int, float)) else f"{peak:.3g} GB"


# --- GPU MODE ---------------------------------------------------------------------------------


def lay_out_gpumode(problem: Path, solution: Path, tmp: Path) -> Path:
    """The problem folder as task.yml's `files:` lays it out, with `solution` as submission.py.

    Each file is placed under its `name` in the folder (what their eval.py imports) and also at
    its `source` path relative to the folder (`../utils.py`), which is how ktui resolves it.
    """
    folder = tmp / problem.name
    folder.mkdir()
    task = yaml.safe_load((problem / "task.yml").read_text())
    shutil.copy(problem / "task.yml", folder / "task.yml")
    for entry in task["files"]:
        if entry["source"] == "@SUBMISSION@":
            shutil.copy(solution, folder / entry["name"])
            continue
        shutil.copy(problem / entry["source"], folder / entry["name"])
        mirrored = (folder / entry["source"]).resolve()
        if not mirrored.exists():
            mirrored.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(problem / entry["source"], mirrored)
    return folder


def popcorn_tests(cases: list[dict]) -> str:
    """task.yml cases in eval.py's test-file format: one `key: value; key: value` line each."""
    return "".join("; ".join(f"{k}: {v}" for k, v in case.items()) + "\n" for case in cases)


def run_popcorn(folder: Path, mode: str, cases: list[dict], *, log: Path, timeout_s: float) -> Outcome:
    """`POPCORN_FD=fd python3 eval.py MODE tests.txt`; their verdict is the `check:` line."""
    tests = folder / f"{mode}.txt"
    tests.write_text(popcorn_tests(cases))
    report_path = log.with_suffix(f".{mode}.popcorn")
    with open(report_path, "w") as report:
        env = dict(os.environ, POPCORN_FD=str(report.fileno()))
        done = run_child([sys.executable, "eval.py", mode, tests.name], cwd=folder, timeout_s=timeout_s,
                         env=env, pass_fds=(report.fileno(),))
    log.with_suffix(f".{mode}.log").write_text(f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    fields = {}
    for line in report_path.read_text().splitlines():
        key, _, value = line.partition(": ")
        fields[key] = value
    if done.returncode is None:
        return Outcome("timed_out", f"{mode}: no verdict within {timeout_s:.0f} s", done.wall_s)
    check = fields.get("check")
    if check is None:
        return Outcome("crashed", f"{mode}: exit {done.returncode}: {last_line(done.stderr)}", done.wall_s)
    error = next((v for k, v in fields.items() if k.endswith(".error")), "")
    if check == "pass" and mode != "test":
        means = [float(v) for k, v in fields.items() if k.endswith(".mean")]
        note = f"{mode}: mean of means {sum(means) / len(means) / 1e3:.1f} us" if means else ""
        return Outcome("pass", note, done.wall_s)
    return Outcome(check, f"{mode}: {first_line(error)}" if error else "", done.wall_s)


def gpumode_rows(root: Path, only: list[str], out: Path, timeout_s: float, ktui_args: list[str],
                 ktui_only: bool = False):
    for problem_solutions in sorted((SOLUTIONS / "gpumode").iterdir()):
        problem = root / problem_solutions.name
        task = yaml.safe_load((problem / "task.yml").read_text())
        for solution in sorted(problem_solutions.glob("*.py")):
            if not selected(f"gpumode/{problem.name}/{solution.stem}", only):
                continue
            log = out / "gpumode" / problem.name / solution.stem
            log.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="corpus_gpumode_") as tmp:
                folder = lay_out_gpumode(problem, solution, Path(tmp))
                ktui = run_ktui([str(folder / "submission.py")], log=log, timeout_s=timeout_s, extra=ktui_args)
                if ktui_only:
                    yield Row("gpumode", problem.name, solution.name, ktui, [])
                    continue
                test = run_popcorn(folder, "test", task["tests"], log=log,
                                   timeout_s=min(timeout_s, task.get("test_timeout", GPUMODE_TEST_TIMEOUT_S)))
                ranked = run_popcorn(folder, "leaderboard", task["benchmarks"], log=log,
                                     timeout_s=min(timeout_s, task.get("ranked_timeout", GPUMODE_RANKED_TIMEOUT_S)))
            yield Row("gpumode", problem.name, solution.name, ktui, [test, ranked])


# --- KernelBench ------------------------------------------------------------------------------


def kernelbench_child(root: Path, problem: Path, solution: Path, result: Path, trials: int) -> None:
    """In a child process: their eval_kernel_against_ref on the pair; the result as JSON."""
    sys.path.insert(0, str(root / "src"))
    try:
        from kernelbench.eval import eval_kernel_against_ref
    except ImportError as e:
        result.write_text(json.dumps({"import_error": f"{e} (their package needs it; see the script's notes)"}))
        return
    import torch

    outcome = eval_kernel_against_ref(
        problem.read_text(), solution.read_text(), seed_num=42, num_correct_trials=trials,
        num_perf_trials=100, measure_performance=True, timing_method="cuda_event", backend="triton",
        precision=torch.float32, device=0)
    result.write_text(json.dumps(None if outcome is None else outcome.model_dump(), default=str))


def run_kernelbench_eval(root: Path, problem: Path, solution: Path, *, log: Path, timeout_s: float,
                         trials: int) -> Outcome:
    result = log.with_suffix(".kernelbench.json")
    result.unlink(missing_ok=True)
    # Their package imports litellm, which otherwise tries to download a price list on import.
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    done = run_child([sys.executable, __file__, "--kernelbench", str(root), "--kernelbench-child",
                      str(problem), str(solution), str(result), "--trials", str(trials)],
                     cwd=REPO, timeout_s=timeout_s, env=env)
    log.with_suffix(".kernelbench.log").write_text(f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    if done.returncode is None:
        return Outcome("timed_out", f"no result within {timeout_s:.0f} s", done.wall_s)
    if not result.exists():
        return Outcome("crashed", f"exit {done.returncode}: {last_line(done.stderr)}", done.wall_s)
    data = json.loads(result.read_text())
    if data is None:
        return Outcome("error", "eval_kernel_against_ref returned None (their retry-on-lock case)", done.wall_s)
    if "import_error" in data:
        return Outcome("error", data["import_error"], done.wall_s)
    meta = data.get("metadata", {})
    if not data["compiled"]:
        return Outcome("compile failed", first_line(str(meta.get("compilation_error", ""))), done.wall_s)
    if not data["correctness"]:
        issue = meta.get("runtime_error") or meta.get("correctness_issue", "")
        diff = f" (max diff {meta['max_difference'][0]})" if "max_difference" in meta else ""
        return Outcome("failed", first_line(f"{issue}{diff} {meta.get('correctness_trials', '')}"), done.wall_s)
    note = ""
    if data.get("runtime", -1) > 0 and data.get("ref_runtime", -1) > 0:
        note = f"{data['runtime']:.2f} ms vs ref {data['ref_runtime']:.2f} ms = {data['ref_runtime'] / data['runtime']:.2f}x"
        if meta.get("excessive_speedup"):
            note += " (excessive_speedup)"
    return Outcome("passed", note, done.wall_s)


def kernelbench_rows(root: Path, only: list[str], out: Path, timeout_s: float, ktui_args: list[str],
                     trials: int, ktui_only: bool = False):
    for problem_solutions in sorted((SOLUTIONS / "kernelbench").iterdir(), key=lambda p: int(p.name.split("_")[0])):
        problem = root / "KernelBench" / "level1" / f"{problem_solutions.name}.py"
        for solution in sorted(problem_solutions.glob("*.py")):
            if not selected(f"kernelbench/{problem_solutions.name}/{solution.stem}", only):
                continue
            log = out / "kernelbench" / problem_solutions.name / solution.stem
            log.parent.mkdir(parents=True, exist_ok=True)
            # Copies, so that ktui's state (.ktui/) lands in the temporary directory, not beside
            # the solution or in the corpus checkout.
            with tempfile.TemporaryDirectory(prefix="corpus_kernelbench_") as tmp:
                candidate = Path(tmp) / solution.name
                reference = Path(tmp) / problem.name
                shutil.copy(solution, candidate)
                shutil.copy(problem, reference)
                ktui = run_ktui([str(candidate), "--reference", str(reference)], log=log,
                                timeout_s=timeout_s, extra=ktui_args)
            theirs = [] if ktui_only else [run_kernelbench_eval(root, problem, solution, log=log, timeout_s=timeout_s,
                                                                trials=trials)]
            yield Row("kernelbench", problem_solutions.name, solution.name, ktui, theirs)


# --- the table --------------------------------------------------------------------------------


def selected(name: str, only: list[str]) -> bool:
    return not only or any(part in name for part in only)


def device_name() -> str:
    done = run_child([sys.executable, "-c", "import torch; print(torch.cuda.get_device_name() "
                      "if torch.cuda.is_available() else 'no CUDA')"], cwd=REPO, timeout_s=120)
    return done.stdout.strip() or f"unknown ({last_line(done.stderr)})"


def markdown_row(row: Row) -> str:
    theirs = " / ".join(o.verdict for o in row.theirs) or "not run"
    theirs_s = " / ".join(f"{o.wall_s:.1f}" for o in row.theirs) or "-"
    notes = "; ".join(n for n in [row.ktui.note and f"ktui: {row.ktui.note}",
                                  *[o.note and f"theirs: {o.note}" for o in row.theirs]] if n)
    cells = [row.problem, row.solution, row.ktui.verdict, theirs, f"{row.ktui.wall_s:.1f}", theirs_s,
             row.ktui.memory or "-", notes.replace("|", "\\|")]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpumode", type=Path, help="the pmpp_v2 folder of a GPU MODE reference-kernels checkout")
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (KernelBench/level1, src/kernelbench)")
    parser.add_argument("--only", action="append", default=[],
                        help="run only solutions whose 'corpus/problem/solution' contains this (repeatable)")
    parser.add_argument("--out", type=Path, default=Path("corpus_table_out"), help="folder for logs and the table")
    parser.add_argument("--timeout", type=float, default=300, help="limit per command, seconds")
    parser.add_argument("--trials", type=int, default=5, help="KernelBench num_correct_trials (their scripts use 5)")
    parser.add_argument("--ktui-arg", action="append", default=[],
                        help="extra argument for `ktui run`, e.g. --ktui-arg=--bench-time --ktui-arg=1")
    parser.add_argument("--ktui-only", action="store_true",
                        help="run ktui's column alone (the evaluators' verdicts are not re-run)")
    parser.add_argument("--kernelbench-child", nargs=3, type=Path, metavar=("PROBLEM", "SOLUTION", "RESULT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.kernelbench_child:
        kernelbench_child(args.kernelbench.resolve(), *args.kernelbench_child, trials=args.trials)
        return 0
    if not (args.gpumode or args.kernelbench):
        parser.error("give --gpumode and/or --kernelbench")

    args.out.mkdir(parents=True, exist_ok=True)
    header = (f"Corpus table · {device_name()} · "
              f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    lines = [header, "", "| problem | solution | ktui | theirs (GPU MODE: test / leaderboard) | ktui s | theirs s | "
             "ktui peak memory | notes |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    print("\n".join(lines), flush=True)
    rows: list[Row] = []
    sources = []
    if args.gpumode:
        sources.append(gpumode_rows(args.gpumode.resolve(), args.only, args.out, args.timeout, args.ktui_arg,
                                    args.ktui_only))
    if args.kernelbench:
        sources.append(kernelbench_rows(args.kernelbench.resolve(), args.only, args.out, args.timeout,
                                        args.ktui_arg, args.trials, args.ktui_only))
    for source in sources:
        for row in source:
            rows.append(row)
            lines.append(markdown_row(row))
            print(lines[-1], flush=True)
    (args.out / "table.md").write_text("\n".join(lines) + "\n")
    (args.out / "rows.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
