"""The worker: a child process that runs user code, one job after another, and streams events.

It imports torch and Triton once (and holds the CUDA context on a GPU), then waits for jobs on a
private copy of the original stdin, one JSON line each (``ktui.worker.parent``), and answers with
event lines on a private copy of the original stdout. The user's prints go to stderr, which the
parent forwards as ``output`` events, so no print can corrupt the protocol. Anything that kills this process — a segfault, an illegal
memory access, ``os._exit`` — is turned into a verdict by the parent (see ``ktui.dispatch.runner``).

It may write only its run folders, its temp folder, the compilers' caches and /dev
(``ktui.worker.confine``): the history is the parent's alone. It reads the user's calibrations and
never writes them: the first benchmark on a GPU kind with none asks the parent, whose measuring
process keeps one (``ktui.worker.parent``).

Protocol lines (worker → parent), besides the run's events:
    {"type": "ready", "tier": ..., "device": ..., "arch": ..., "pid": ..., "confined": bool, "confinement": ...,
     "start_s": {phase: seconds}}
    {"type": "calibration_wanted"}  (answered on stdin: ``ktui.measure.calibrate.ASK``)
    {"type": "job_done", "run_id": ..., "healthy": bool}
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import threading
import time
from typing import IO

from ktui.protocol import processes
from ktui.protocol.statedir import user_calibrations
from ktui.worker import stack_request
from ktui.worker.confine import Confinement, confine, readable_from_env, writable_from_env
from ktui.worker.parent import Parent, private_input
from ktui.worker.tier_named import sandbox_named


def protocol_channel() -> IO[str]:
    """Keep the real stdout for events; send everything printed to stderr instead.

    The user's prints are written through at once, unbuffered: a kernel that prints half a line
    and then crashes the process must still have its last words reach the parent's message.
    """
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  write_through=True)
    return channel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ktui.worker.main")
    parser.add_argument("--arch", default=None)
    parser.add_argument("--cpu", action="store_true", help="run the CPU tier even if a GPU is present")
    parser.add_argument("--compile-ahead", action="store_true",
                        help="keep helpers that compile a run's other shapes ahead (ktui.worker.ahead)")
    parser.add_argument("--allow-network", action="store_true", help="let user code use the network")
    parser.add_argument("--fresh-caches", action="store_true",
                        help="compiler caches of its own, removed with it (a strict run's worker)")
    args = parser.parse_args(argv)
    phases = StartPhases()
    # First of all: Landlock binds this thread and those it starts, not threads already running.
    confinement = sandbox(args.allow_network, args.fresh_caches)
    # A kernel past its time limit: the parent asks for every thread's Python stack before the
    # kill (see ktui.dispatch.stacks), written on the stderr pipe whatever user code does to
    # sys.stderr; before any other thread starts (see ktui.worker.stack_request).
    stack_request.listen(os.fdopen(os.dup(2), "w"))
    channel = protocol_channel()
    # Before any user code: what it starts stays in this process's tree, and none of it (nor this
    # process) outlives the parent (see ktui.protocol.processes).
    processes.become_subreaper()
    processes.watch_parent(int(os.environ.get(processes.PARENT_ENV) or 0))

    def send(obj: dict) -> None:
        channel.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
        channel.flush()

    parent = Parent(send, private_input())

    phases.mark("confine")
    # Heavy imports happen once, here: this is what makes the worker warm.
    import torch

    phases.mark("torch")
    from ktui.worker.dsl.registry import for_user_code

    tier = sandbox_named(for_user_code(args.arch, force_cpu=args.cpu), confinement.confined)
    phases.mark("dsls")

    from ktui.protocol.job import Job
    from ktui.worker import memory  # noqa: F401 (guarded: imported before the snapshot below)
    from ktui.worker.integrity import HarnessGuard

    phases.mark("rung modules")
    if tier.is_gpu:
        torch.cuda.init()
    phases.mark("cuda init")
    guard = HarnessGuard.snapshot()  # before any user code runs in this process
    phases.mark("harness snapshot")
    send({"type": "ready", "tier": tier.name, "device": tier.device, "arch": tier.arch, "pid": os.getpid(),
          **confinement.to_json(), "start_s": phases.seconds})

    from ktui.worker.ahead.inputs import InputsAhead
    from ktui.worker.ahead.pool import AheadPool

    ahead = AheadPool.for_worker(args.compile_ahead and tier.is_gpu, tier.arch)
    inputs = InputsAhead()
    idle = IdleHelpers(ahead, helpers_idle_s())
    try:
        for line in parent.jobs():
            with idle.busy():
                job = Job.from_json(json.loads(line))
                healthy = run_job(job, tier, lambda event: send(event.to_json()), guard, confinement, ahead, inputs,
                                  parent)
                send({"type": "job_done", "run_id": job.run_id, "healthy": healthy})
                if not healthy:
                    return 0
                ahead.start()  # a worker that served one job serves a session: its next runs compile ahead
                inputs.make()  # the run is over: its kernel's next traced call, if it was run twice in a row
    finally:
        idle.stop()
        ahead.close()
    return 0


def sandbox(allow_network: bool = False, fresh_caches: bool = False) -> Confinement:
    """The worker's confinement (``ktui.worker.confine``): it writes the run folders the parent named,
    reads the workspaces it named, and reads the user's calibrations, which it never writes."""
    return confine(writable_from_env(), readable_from_env(), read_only=[user_calibrations()], fresh_caches=fresh_caches,
                   network_allowed="--allow-network" if allow_network else "")


def helpers_idle_s() -> float:
    """``KTUI_HELPERS_IDLE_S``: how long the helpers outlive the last job (default 120 s)."""
    try:
        seconds = float(os.environ.get(processes.HELPERS_IDLE_ENV) or HELPERS_IDLE_S)
    except ValueError:
        seconds = HELPERS_IDLE_S
    return seconds if seconds > 0 else HELPERS_IDLE_S


HELPERS_IDLE_S = 120.0


class IdleHelpers:
    """The compile-ahead helpers end when no job has come for ``seconds``: a worker kept warm between
    an agent's calls holds no helpers (nor their memory) through a long pause; the next job's
    ``ahead.start()`` brings them back."""

    def __init__(self, ahead, seconds: float):
        self.ahead = ahead
        self.seconds = seconds
        self._lock = threading.Lock()  # held through a job: the helpers never end under one
        self._jobs = 0
        self._timer: threading.Timer | None = None

    @contextlib.contextmanager
    def busy(self):
        with self._lock:
            self._jobs += 1
            if self._timer is not None:
                self._timer.cancel()
            yield
            self._timer = threading.Timer(self.seconds, self._end, args=(self._jobs,))
            self._timer.daemon = True
            self._timer.start()

    def _end(self, jobs: int) -> None:
        with self._lock:
            if jobs == self._jobs:  # no job came since
                self.ahead.close()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class StartPhases:
    """Where the worker's start went, phase by phase, from ``main``'s first line (``start_s`` in the
    ready message; ``tests/benchmarks/worker_start.py`` adds the interpreter's own start before it)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 4)
        self._last = now


def run_job(job, tier, emit, guard=None, confinement=None, ahead=None, inputs=None, parent=None) -> bool:
    """Climb the ladder for one job; return whether this process may take another one. ``parent``:
    the process that started this one (``ktui.worker.parent.Parent``), which measures a calibration
    the benchmark asks for."""
    from ktui.protocol.events import COMPILED, RunFinished, compile_only_text
    from ktui.worker import memory
    from ktui.worker.context import RunContext
    from ktui.worker.ladder import Ladder, compile_only, summarize, verdict
    from ktui.worker.modules import job_imports

    started = time.perf_counter()
    ctx = RunContext(job=job, tier=tier, emit=emit, guard=guard, ahead=ahead, inputs_ahead=inputs, parent=parent)
    ctx.peaks = memory.Peaks(tier)
    threads_before = set(threading.enumerate())
    with job_imports(job):
        results = Ladder(ctx).climb()
    figures = memory.summary_figures(ctx, ctx.peaks.of_run())
    final = verdict(results, compile_only(ctx))
    only = "/".join(dsl.title for dsl in ctx.dsls if not dsl.runs_on_cpu)
    checked = {"compile_only": compile_only_text(tier.arch, only)} if final == COMPILED else {}
    _end_job_output()
    # Nothing user code started outlives its run, and the run is over once it says so: a file
    # written after ``run_finished`` is someone's save (``ktui.watch.echoes.UnconfinedRuns.could_have_written``).
    processes.end_descendants(keep=ahead.pids() if ahead is not None else set())
    left = threads_left(threads_before)
    emit(
        RunFinished(
            job.run_id,
            verdict=final,
            summary={**summarize(results, *_roofline_done(ctx)), **figures, **checked,
                     **(confinement.to_json() if confinement else {}), **({"threads_left": left} if left else {})},
            duration_s=round(time.perf_counter() - started, 3),
        )
    )
    if inputs is not None and not left:
        inputs.after_run(ctx)
    return _device_healthy(tier) and not left


THREAD_GRACE_S = 0.5  # how long threads a run started may take to end once it is over


def threads_left(before: set[threading.Thread]) -> list[str]:
    """The threads user code started that still run once its run is over, each as ``name
    (file:line)``: such a thread would go on in this warm worker and print into the next
    kernel's output, so the worker is replaced instead. ktui's own threads are named ``ktui-…``;
    a thread foreign to Python (``_DummyThread``) cannot be told apart or joined and is left out."""
    new = [t for t in threading.enumerate() if t not in before and not t.name.startswith("ktui-")
           and not isinstance(t, threading._DummyThread)]
    deadline = time.monotonic() + THREAD_GRACE_S
    for thread in new:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    return [f"{t.name} ({_started_at(t)})" for t in new if t.is_alive()]


def _started_at(thread: threading.Thread) -> str:
    """Where the thread's code is: its target's file and line, or its class's ``run``."""
    code = getattr(getattr(thread, "_target", None), "__code__", None) or getattr(type(thread).run, "__code__", None)
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code is not None else "?"


def _end_job_output() -> None:
    """Mark the end of what this job printed on the parent's stderr pipe (``OUTPUT_END``), after
    whatever Python still buffers: a last line without its newline reaches the parent now."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # user code closed or replaced it
            pass
    os.write(2, f"{processes.OUTPUT_END}\n".encode())


def _roofline_done(ctx) -> tuple[float, str]:
    """The job's "satisfied" threshold and where it was set; a bad setting already failed the
    benchmark rungs (which then leave the kernel unsatisfied)."""
    from ktui.measure.roofline import DEFAULT_DONE
    from ktui.worker.errors import RungFailure
    from ktui.worker.rungs.bench import roofline_done

    try:
        return roofline_done(ctx)
    except (RungFailure, ValueError):
        return DEFAULT_DONE, "default"


def _device_healthy(tier) -> bool:
    """After a sticky CUDA error every later call fails: such a worker must be replaced."""
    from ktui.worker.tier import device_usable

    return device_usable(tier)


if __name__ == "__main__":
    sys.exit(main())
