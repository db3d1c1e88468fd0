"""The worker's compile-ahead helpers: started after its first job, handed shapes as a run starts.

Only a session's worker keeps them (``ktui watch``, ``serve``, the MCP server pass
``--compile-ahead``; a one-shot ``ktui run`` would pay their start for nothing): on a GPU, one per
four cores and at most four (``default_size``), or N with ``KTUI_COMPILE_AHEAD=N`` (0: none). On
the H200 four took the shipped softmax's save → verdict from 1.02 s to 0.76 s p50, and eight were
no faster than four (docs/measured/log/2026-12-03.md, the ninth sitting). None on the CPU tier, where Triton's interpreter runs the kernels and nothing is
compiled per shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

from ktui.protocol import processes
from ktui.worker.outcome import shape_key

STUCK_S = 120.0  # a helper busy this long (user code that hangs on the host) is replaced


DEFAULT_MAX = 4  # a save of the shipped softmax hands out 8 shapes: on the H200 eight helpers were no faster


def default_size(cpus: int | None) -> int:
    """A session's helpers when ``KTUI_COMPILE_AHEAD`` is unset: one per four cores, at most
    ``DEFAULT_MAX``. Each compiles on a core of its own, beside the worker and the parent."""
    return min(DEFAULT_MAX, (cpus or 1) // 4)


def wanted(session_on_gpu: bool, env: str | None = None, cpus: int | None = None) -> int:
    """How many helpers a worker keeps: none off a GPU; else ``KTUI_COMPILE_AHEAD``'s count, or
    ``default_size`` when it is unset. The parent refused a bad value before starting the worker
    (``options.worker_config``)."""
    if not session_on_gpu:
        return 0
    try:
        count = processes.compile_ahead_helpers(env)
    except ValueError:
        return 0
    return default_size(os.cpu_count() if cpus is None else cpus) if count is None else count


class Helper:
    """One ``python -m ktui.worker.ahead`` child and what it last said.

    ``replay`` (a request: the session's latest run and its shapes) is sent as soon as the helper
    says ready. Its first request pays what a new process pays once — importing the kernel and its
    reference, the first inputs made on the GPU, Triton's first launch of a kernel — and the
    specialisations it asks for are in Triton's cache already, so that costs nobody a wait; the
    next save finds the helper warm.
    """

    def __init__(self, argv: list[str], replay: tuple[dict[str, Any], list[dict]] | None = None):
        env = {**os.environ, processes.PARENT_ENV: str(os.getpid())}
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1, env=env)
        self.ready = threading.Event()
        self.idle = threading.Event()
        self.busy_since = 0.0
        self.answers: list[dict[str, Any]] = []
        self._replay = replay
        self._taking = threading.Lock()  # the reader's replay and the ladder's submit may meet
        threading.Thread(target=self._read, name="ktui-ahead-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if message.get("type") == "ready":
                self.ready.set()
            elif message.get("type") == "done":
                self.answers.append(message)
            self.idle.set()
            if message.get("type") == "ready" and self._replay is not None:
                self.take(*self._replay)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stuck(self) -> bool:
        return self.ready.is_set() and not self.idle.is_set() and time.monotonic() - self.busy_since > STUCK_S

    def take(self, job: dict[str, Any], shapes: list[dict]) -> bool:
        """Hand it ``shapes`` if it is ready and idle; whether it took them."""
        with self._taking:
            if not (self.ready.is_set() and self.idle.is_set() and self.alive()):
                return False
            self.idle.clear()
            self.busy_since = time.monotonic()
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"job": job, "shapes": shapes}) + "\n")
                self.proc.stdin.flush()
            except (OSError, ValueError):
                return False
            return True

    def end(self) -> None:
        processes.kill_all([self.proc.pid, *processes.descendants(self.proc.pid)])
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


class AheadPool:
    """Up to ``size`` helpers; ``submit`` spreads a run's shapes over the idle ones."""

    def __init__(self, size: int, argv: list[str]):
        self.size = size
        self.argv = argv
        self.helpers: list[Helper] = []
        self.latest: tuple[dict[str, Any], list[dict]] | None = None  # the last run's request: a new helper's replay

    @classmethod
    def for_worker(cls, session_on_gpu: bool, arch: str) -> AheadPool:
        size = wanted(session_on_gpu, os.environ.get(processes.COMPILE_AHEAD_ENV))
        return cls(size, [sys.executable, "-m", "ktui.worker.ahead", "--arch", arch])

    def start(self) -> None:
        """Bring the pool to its size, replacing helpers that died or hang; returns at once."""
        for helper in [h for h in self.helpers if not h.alive() or h.stuck()]:
            helper.end()
            self.helpers.remove(helper)
        while len(self.helpers) < self.size:
            self.helpers.append(Helper(self.argv, self.latest))

    def submit(self, job: dict[str, Any], shapes: list[dict]) -> dict[str, int]:
        """Deal ``shapes`` round-robin to the idle helpers; what was handed out to how many."""
        self.latest = (job, shapes) if shapes else self.latest
        idle = [h for h in self.helpers if h.ready.is_set() and h.idle.is_set() and h.alive()]
        if not idle or not shapes:
            return {}
        shares = [shapes[i::len(idle)] for i in range(min(len(idle), len(shapes)))]
        taken = [share for helper, share in zip(idle, shares) if helper.take(job, share)]
        return {"shapes": sum(len(share) for share in taken), "helpers": len(taken)} if taken else {}

    def pids(self) -> set[int]:
        """The helpers: the worker's end-of-job sweep leaves them, and what they run, alone."""
        return {h.proc.pid for h in self.helpers if h.alive()}

    def close(self) -> None:
        for helper in self.helpers:
            helper.end()
        self.helpers.clear()


def shapes_ahead(ctx: Any) -> list[dict]:
    """The shapes a run will call ``custom_kernel`` on after its compile rung's traced one: the
    declared tests, the planned fresh shapes, the benchmarks when they run; each once."""
    from ktui.worker.rungs.compilation import traced_shape

    traced = traced_shape(ctx) if (ctx.benchmarks or ctx.tests) else None  # the worker compiles that one itself
    fresh = ctx.fresh_plan if isinstance(ctx.fresh_plan, list) else []
    wanted_shapes = [*ctx.tests, *fresh, *(ctx.benchmarks if ctx.job.options.benchmark else [])]
    seen = {shape_key(traced)}
    out = []
    for shape in wanted_shapes:
        key = shape_key(shape)
        if key not in seen:
            seen.add(key)
            out.append(shape)
    return out


def submit_run(ctx: Any) -> dict[str, int]:
    """Hand the run's other shapes to the helpers when every DSL of its module can compile ahead."""
    pool = ctx.ahead
    if pool is None or not pool.size or not ctx.dsls or not all(dsl.compiles_ahead for dsl in ctx.dsls):
        return {}  # a pool still starting is told the run all the same: its helpers replay it
    return pool.submit(ctx.job.to_json(), shapes_ahead(ctx))
