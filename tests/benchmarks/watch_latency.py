"""Save → verdict through the real watcher: ``ktui watch kernels/ --headless --no-bench``.

Each repetition saves a new version of one shipped kernel (``--kernel``, default the Triton softmax)
the way an agent does (a temp file, then ``os.replace``), with an edit of the kernel's body that
changes its generated code (``EDITS``: a number new with each save, and with each run of this
script, in a place where it leaves the answer as it was, such as a shift of a softmax's exponent),
so every compiler cache misses and the kernel really recompiles; the script asserts that each save's
CUBIN differs from the one before. It times from the rename to the JSON events the watch loop
prints: the first ``correctness[...]`` result (where one ran) and ``run_finished``. The debounce,
the hand-off to the warm worker, compile, the checks and the history write are all inside the
figure.

    python tests/benchmarks/watch_latency.py [--kernel softmax_triton] [--reps 8] [--cpu]
        [--ahead N | --no-ahead] [--settle 20] [--gap 0] [--json OUT.json]

Every shipped kernel of the three DSLs has its edit (``--kernel softmax_tilelang``,
``rmsnorm_cutedsl``, ``gemm_bf16_tilelang``…). On the CPU tier (``--cpu``, or no GPU) a CuTeDSL or
TileLang kernel is compiled and not run, so the figure is save → ``compiled``; a Triton kernel runs
in Triton's interpreter and is ``passed``. Every save must reach the verdict of the first run.

The watch session's worker keeps compile-ahead helpers on a GPU (``ktui.worker.ahead``: one per four
cores, at most four), started once it has served its first run: ``--settle`` waits that long after
the first run so they are up before the timed saves, and each save prints how many shapes its run
handed them and each rung's seconds. ``--ahead N`` asks for N helpers (``KTUI_COMPILE_AHEAD=N``);
``--no-ahead`` (``KTUI_COMPILE_AHEAD=0``) runs the same saves with none, for the comparison; with
neither, the variable is left as it is. ``--gap`` waits that long after each verdict before the next
save (default 0: at once). A worker that ran the kernel twice in a row makes the next traced call's
inputs once a run is over (``ktui.worker.ahead.inputs``); a save sooner than that waits for them,
where an edit between saves leaves the worker time.

Prints the device line of the watcher, the first run's time (a fresh workspace: the per-user
compiler caches are the machine's), p50 / min / max of both figures, and where the time went: one
row per stage (the save noticed, queue and hashing, the hand-off to the worker, each rung, the
compile rung's inputs and traced call, the phases of the correctness rungs — inputs, candidate,
reference, metrics —, the gaps between rungs, the summary, the history store and the event
delivery), from the events' own time stamps.

A GPU sitting runs it for the Triton softmax (``gpu_session.sh queue watch``: saves back to back,
then a second apart) and for the CuTeDSL softmax and the TileLang softmax, RMSNorm and GEMM
(``queue watch-dsls``: saves a second apart), each as::

    python tests/benchmarks/watch_latency.py --kernel softmax_tilelang --reps 6 --settle 20 --gap 1
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# kernel: (text in the shipped file, what it becomes: ``{v}`` a number new with each save). Each
# edit changes a constant the compiler keeps and leaves the answer as it was: a softmax's exponent
# shifted by v / 1024 (the row's normalisation cancels it), an RMSNorm's epsilon scaled by
# 1 + v / 1024, an accumulator or a sum offset by v · 2⁻¹⁰⁰ (absorbed by any value above 2⁻⁷⁶).
SHIFT, SCALE, TINY = "shift", "scale", "tiny"
EDITS: dict[str, tuple[str, str, str]] = {
    "softmax_triton": ("    x = x - tl.max(x, axis=0)\n", "    x = x - tl.max(x, axis=0) + {v}\n", SHIFT),
    "softmax_cutedsl": ("e = cute.math.exp2((x - row_max) * LOG2_E, fastmath=True)",
                        "e = cute.math.exp2((x - row_max) * LOG2_E + {v}, fastmath=True)", SHIFT),
    "softmax_tilelang": ("T.exp2((x[i, j] - top[i]) * LOG2E)", "T.exp2((x[i, j] - top[i]) * LOG2E + {v})", SHIFT),
    "rmsnorm_triton": ("/ n_cols + eps)", "/ n_cols + eps * {v})", SCALE),
    "rmsnorm_cutedsl": ("EPS = 1e-6\n", "EPS = 1e-6 * {v}\n", SCALE),
    "rmsnorm_tilelang": ("EPS = 1e-6\n", "EPS = 1e-6 * {v}\n", SCALE),
    "gemm_bf16_triton": ("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
                         "acc = tl.full((BLOCK_M, BLOCK_N), {v}, dtype=tl.float32)", TINY),
    "gemm_bf16_cutedsl": ("sub_f32[v] = tRS_acc[e * per_sub + v]\n", "sub_f32[v] = tRS_acc[e * per_sub + v] + {v}\n", TINY),
    "gemm_bf16_tilelang": ("T.clear(acc)", "T.fill(acc, {v})", TINY),
    "add_triton": ("tl.store(out_ptr + offsets, x + y, mask=mask)", "tl.store(out_ptr + offsets, x + y + {v}, mask=mask)", TINY),
    "add_cutedsl": ("rOut.store(rX.load() + rY.load())", "rOut.store(rX.load() + rY.load() + {v})", TINY),
    "add_tilelang": ("Out[bx * TILE + i] = X[bx * TILE + i] + Y[bx * TILE + i]",
                     "Out[bx * TILE + i] = X[bx * TILE + i] + Y[bx * TILE + i] + {v}", TINY),
}


def edited(source: str, kernel: str, n: float) -> str:
    """``source`` with its edit for the ``n``-th save (``n`` > 0, new with each save)."""
    old, new, kind = EDITS[kernel]
    assert old in source, f"the shipped {kernel} changed: update its edit in EDITS"
    value = {SHIFT: n / 1024, SCALE: 1 + n / 1024, TINY: n * 2.0 ** -100}[kind]
    return source.replace(old, new.replace("{v}", repr(value)))


def workspace(kernel: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix="ktui-watch-latency-"))
    (root / "kernels").mkdir()
    shutil.copytree(REPO / "references", root / "references")
    shutil.copy(REPO / "kernels" / f"{kernel}.py", root / "kernels" / f"{kernel}.py")
    return root


def cubin_hashes(rungs: dict[str, dict]) -> list[str]:
    """The SHA-256 of each CUBIN the run's dumps wrote, sorted (empty where nothing was dumped)."""
    folder = (rungs.get("dumps", {}).get("figures") or {}).get("dir")
    if not folder:
        return []
    return sorted(hashlib.sha256(path.read_bytes()).hexdigest() for path in Path(folder).glob("*.cubin"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="softmax_triton", choices=sorted(EDITS), help="the shipped kernel to edit")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-ahead", action="store_true", help="no compile-ahead helpers (KTUI_COMPILE_AHEAD=0)")
    ap.add_argument("--ahead", type=int, default=None, metavar="N", help="N compile-ahead helpers (KTUI_COMPILE_AHEAD=N)")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds to wait after the first run (helpers start)")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds to wait after each verdict before the next save")
    args = ap.parse_args()
    root = workspace(args.kernel)
    kernel = root / "kernels" / f"{args.kernel}.py"
    source = kernel.read_text()
    edited(source, args.kernel, 1.0)  # the edit still applies, before anything starts
    fresh = random.Random().random()  # each run of the script edits to numbers no cache has seen
    argv = [sys.executable, "-m", "ktui", "watch", "kernels/", "--headless", "--no-bench", *(["--cpu"] if args.cpu else [])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if args.no_ahead or args.ahead is not None:
        env["KTUI_COMPILE_AHEAD"] = "0" if args.no_ahead else str(args.ahead)
    errors = tempfile.TemporaryFile("w+")  # noqa: SIM115 (the watcher writes it until the end)
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
    events: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            if line.startswith("{"):
                events.put((time.perf_counter(), json.loads(line)))
        events.put((time.perf_counter(), {"type": "watcher_exited"}))

    threading.Thread(target=read, daemon=True).start()

    def wait_for(kind: str, timeout: float = 300.0) -> tuple[float, dict]:
        deadline = time.monotonic() + timeout
        while True:
            at, event = events.get(timeout=max(0.1, deadline - time.monotonic()))
            exited(event)
            if event.get("type") == kind:
                return at, event

    def exited(event: dict) -> None:
        if event["type"] == "watcher_exited":
            errors.seek(0)
            raise SystemExit(f"the watcher exited with {proc.wait()}:\n{errors.read()[-2000:]}")

    try:
        _, ready = wait_for("runner_ready")
        seen_first: list[tuple[float, dict]] = []
        while not seen_first or seen_first[-1][1].get("type") != "run_finished":  # what is on disk, first
            seen_first.append(events.get(timeout=600))
            exited(seen_first[-1][1])
        first_at, first_run = seen_first[-1]
        expected = first_run["verdict"]
        assert expected in ("passed", "compiled"), first_run
        cubins = cubin_hashes(rungs_of(seen_first))
        assert cubins, "the first run dumped no CUBIN"
        time.sleep(args.settle)  # the session's compile-ahead helpers start after its first run
        first, verdict, stages, handed = [], [], [], []
        for rep in range(args.reps):
            time.sleep(args.gap if rep else 0.0)
            tmp = kernel.with_name(f".{kernel.name}.tmp")
            tmp.write_text(edited(source, args.kernel, rep + 1 + fresh))
            saved, saved_wall = time.perf_counter(), time.time()
            os.replace(tmp, kernel)
            seen: list[tuple[float, dict]] = []
            while True:
                at, event = events.get(timeout=600)
                exited(event)
                seen.append((saved_wall + at - saved, event))
                if (event.get("type") == "rung_finished" and event["rung"].startswith("correctness[")
                        and event["status"] != "skipped" and len(first) == rep):
                    first.append(at - saved)
                if event.get("type") == "rung_finished" and event["rung"] == "compile":
                    handed.append(event["figures"].get("compiling_ahead") or {})
                if event.get("type") == "run_finished":
                    verdict.append(at - saved)
                    assert event["verdict"] == expected, event
                    now = cubin_hashes(rungs_of(seen))
                    assert now and now != cubins, f"save {rep + 1} left the CUBIN as it was: the edit must change the code"
                    cubins = now
                    stages.append(breakdown(saved_wall, seen))
                    ahead = handed[-1] if handed else {}
                    print(f"save {rep + 1}/{args.reps}: {expected} after {verdict[-1]:.3f} s; compiled ahead: "
                          f"{ahead.get('shapes', 0)} shape(s) on {ahead.get('helpers', 0)} helper(s); "
                          f"{per_rung(seen)}", file=sys.stderr, flush=True)
                    break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)
    device = f"{ready.get('device')} · {ready.get('tier')} · {ready.get('arch')}"
    result = {"device": device, "kernel": args.kernel, "verdict": expected, "reps": args.reps, "gap_s": args.gap,
              "date": time.strftime("%Y-%m-%d"), "compiling_ahead": handed,
              "first_run": {"since_start_s": round(first_at - started, 3), "duration_s": first_run.get("duration_s")},
              "first_correctness_s": _stats(first) if first else None, "verdict_s": _stats(verdict),
              "stages_p50_s": {name: statistics.median(s.get(name, 0.0) for s in stages) for name in STAGES}}
    helpers = f"KTUI_COMPILE_AHEAD={env.get('KTUI_COMPILE_AHEAD', 'unset')}: {sum(bool(h) for h in handed)} of {len(handed)} runs handed out"
    print(f"watch latency · {device} · {args.reps} atomic-rename saves of {args.kernel} (each changes its CUBIN), "
          f"{args.gap:g} s after each verdict · {helpers}")
    print(f"  first run, fresh workspace: {expected} {result['first_run']['since_start_s']:.3f} s after the watcher "
          f"started (the run itself {first_run.get('duration_s')} s)")
    for name, label in (("first_correctness_s", "first_correctness_s"), ("verdict_s", f"{expected}_s")):
        s = result[name]
        if s:
            print(f"  {label:20s} p50 {s['p50']:.3f} s  min {s['min']:.3f}  max {s['max']:.3f}")
    print("  where the time went (p50 per stage, s):")
    for name, seconds in result["stages_p50_s"].items():
        print(f"    {name:34s} {seconds:7.3f}")
    print(f"    {'sum of the stage medians':34s} {sum(result['stages_p50_s'].values()):7.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def rungs_of(seen: list[tuple[float, dict]]) -> dict[str, dict]:
    return {e["rung"]: e for _, e in seen if e.get("type") == "rung_finished"}


STAGES = ("save noticed (watcher, debounce)", "queue, hashing, version", "hand-off to the worker",
          "pre-checks (import, contract)", "compile: inputs", "compile: traced call", "compile: other",
          "IR and SASS dumps", "run", "correctness: inputs",
          "correctness: candidate", "correctness: reference", "correctness: metrics", "correctness: other",
          "fresh-shapes", "integrity", "dependence", "other rungs", "between rungs", "summary", "history store, events")
RUNG_STAGES = {"pre-checks": "pre-checks (import, contract)", "dumps": "IR and SASS dumps",
               "run": "run", "fresh-shapes": "fresh-shapes", "integrity": "integrity", "dependence": "dependence"}


def breakdown(saved: float, seen: list[tuple[float, dict]]) -> dict[str, float]:
    """Seconds per stage of one save, from wall-clock arrival times and the events' own stamps."""
    stages = dict.fromkeys(STAGES, 0.0)
    arrived = {e["type"]: at for at, e in seen}
    started = next(e for _, e in seen if e["type"] == "run_started")
    finished = next(e for _, e in seen if e["type"] == "run_finished")
    rungs = [e for _, e in seen if e["type"] == "rung_finished"]
    first_rung = next((e for _, e in seen if e["type"] == "rung_started"), finished)
    noticed = arrived.get("saved", started["time"])
    stages["save noticed (watcher, debounce)"] = noticed - saved
    stages["queue, hashing, version"] = started["time"] - noticed
    stages["hand-off to the worker"] = first_rung["time"] - started["time"]
    for rung in rungs:
        name = rung["rung"].split("[")[0]
        if name == "correctness":
            phases = rung.get("phases_s") or {}
            for phase in ("inputs", "candidate", "reference", "metrics"):
                stages[f"correctness: {phase}"] += phases.get(phase, 0.0)
            stages["correctness: other"] += rung["duration_s"] - sum(phases.values())
        elif name == "compile":
            phases = rung.get("phases_s") or {}
            stages["compile: inputs"] += phases.get("inputs", 0.0)
            stages["compile: traced call"] += phases.get("call", 0.0)
            stages["compile: other"] += rung["duration_s"] - sum(phases.values())
        else:
            stages[RUNG_STAGES.get(name, "other rungs")] += rung["duration_s"]
    last = rungs[-1]["time"] if rungs else first_rung["time"]
    stages["between rungs"] = (last - first_rung["time"]) - sum(r["duration_s"] for r in rungs)
    stages["summary"] = finished["time"] - last
    stages["history store, events"] = arrived["run_finished"] - finished["time"]
    return stages


def per_rung(seen: list[tuple[float, dict]]) -> str:
    """Each rung's seconds; each correctness rung's candidate calls (where a save compiled), the
    compile rung's inputs (and whether they were made ahead) and traced call, and the dumps' phases
    (its thread's files, tools and analysis, and how long the ladder waited for it)."""
    parts = []
    for _, e in seen:
        if e.get("type") == "rung_finished" and e.get("status") != "skipped":
            phases = e.get("phases_s") or {}
            detail = ""
            if e["rung"].startswith(("correctness[", "fresh-shapes")) and phases.get("candidate"):
                detail = f" (candidate {phases['candidate']:.3f})"
            elif e["rung"] == "compile" and phases:
                ahead = ", made ahead" if "inputs_made_ahead_s" in (e.get("figures") or {}) else ""
                detail = f" (inputs {phases.get('inputs', 0):.3f}{ahead}, call {phases.get('call', 0):.3f})"
            elif e["rung"] == "dumps" and phases:
                detail = " (" + ", ".join(f"{name} {seconds:.3f}" for name, seconds in phases.items()) + ")"
            parts.append(f"{e['rung']} {e['duration_s']:.3f}{detail}")
    return "; ".join(parts)


def _stats(samples: list[float]) -> dict:
    return {"p50": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


if __name__ == "__main__":
    sys.exit(main())
