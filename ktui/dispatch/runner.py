"""Running jobs in workers: the warm worker, timeouts, crashes and cancellation.

The process that shows results never runs user code. A ``WorkerRunner`` keeps one warm worker
(``python -m ktui.worker.main``), sends it a job and turns what comes back into events: the worker
protocol (``worker_protocol``) over a transport (``transport``: a local process in its own process
group by default; ``remote.RemoteRunner`` gives it ssh's). When the worker dies mid-run (segfault,
``os._exit``, killed) the run ends ``crashed`` with the signal and the last lines it printed; when
a rung outlives its limit the whole process group is killed and the run ends ``timed_out``;
``cancel`` kills it and the run ends ``cancelled``. A worker that ended any of these ways is
replaced before the next job. A worker whose first benchmark on a GPU kind finds no calibration asks
for one: the runner has it measured beside the worker while the run is in flight, by a process that
is not confined (``first_calibration``).

``Runner`` is what the run queue drives: this, a ``RemoteRunner``, a Ray actor's ``RayRunner``,
the tests' ``ScriptedRunner``.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import socket
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ktui.dispatch import stacks
from ktui.dispatch.first_calibration import Measuring
from ktui.dispatch.readable import ReadRules
from ktui.dispatch.transport import Command, LocalProcess, Transport
from ktui.dispatch.worker_protocol import WorkerProcess, crash_message
from ktui.measure.calibrate import ASK
from ktui.measure.masks import unmasked_of, with_hint
from ktui.protocol import statedir
from ktui.protocol.events import (
    CANCELLED,
    CRASHED,
    TIMED_OUT,
    Event,
    Output,
    RunFinished,
    RungFinished,
    RungStarted,
    RunStarted,
    event_from_json,
    first_failure,
)
from ktui.protocol.job import Job, rung_family

OUTPUT_END_GRACE_S = 2.0  # after job_done, how long the end of the job's printed output may lag
BETWEEN_RUNGS_TIMEOUT_S = 120.0
REPLACED = "cancelled: a newer version replaced this run"  # why the dashboard cancels a run


@dataclass(frozen=True)
class WorkerConfig:
    arch: str | None = None
    force_cpu: bool = False
    gpu: str = ""  # the GPU its runs are recorded on (an index, ``ktui.dispatch.gpus``); "" when unknown
    gpu_uuid: str = ""
    pin_gpu: bool = False  # the worker sees only ``gpu`` (CUDA_VISIBLE_DEVICES): one worker per GPU
    writable: tuple[str, ...] = ()  # the ``.ktui/runs`` folders its runs write (``ktui.worker.confine``)
    readable: tuple[str, ...] = ()  # the workspaces (and files elsewhere) its runs read (``dispatch.readable``)
    compile_ahead: bool = False  # a session's worker (watch, serve, MCP): keep compile-ahead helpers
    allow_network: bool = False  # user code may use the network (``--allow-network``)
    fresh_caches: bool = False  # compiler caches of its own, removed with it (a strict run's worker)

    def command(self) -> Command:
        """The worker's command line and what it may touch; pinned, it sees only its GPU."""
        env = {"CUDA_VISIBLE_DEVICES": self.gpu} if self.pin_gpu and self.gpu else {}
        return Command("ktui.worker.main", tuple(self._args()), env, self.writable, self.readable)

    def _args(self) -> list[str]:
        args: list[str] = []
        if self.arch:
            args += ["--arch", self.arch]
        if self.force_cpu:
            args.append("--cpu")
        if self.compile_ahead:
            args.append("--compile-ahead")
        if self.allow_network:
            args.append("--allow-network")
        if self.fresh_caches:
            args.append("--fresh-caches")
        return args


Launcher = Callable[[WorkerConfig], Transport]  # how a runner starts its worker's process


def local_process(config: WorkerConfig) -> Transport:
    """A worker on this machine: a child process."""
    return LocalProcess(config.command())


class Runner(ABC):
    """What the run queue drives: a Job in, the loop's events out, one job at a time."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Where its runs happen (tier, device, arch, confinement), its worker started if need be;
        WorkerStartError when it cannot start."""

    @property
    @abstractmethod
    def warm(self) -> bool:
        """A worker is running, ready for the next job (what an idle daemon lets go)."""

    @abstractmethod
    def run(self, job: Job) -> Iterator[Event]: ...

    @abstractmethod
    def cancel(self, reason: str = REPLACED, run_id: str | None = None) -> None:
        """Stop the run in flight (from any thread), ended ``cancelled`` with ``reason``; with
        ``run_id``, only if that run is the one in flight."""

    @abstractmethod
    def close(self) -> None: ...

    @property
    def gpu(self) -> str:
        """The GPU its runs are recorded on (an index, ``ktui.dispatch.gpus``); "" when unknown."""
        return ""

    @property
    def runs_here(self) -> bool:
        """Its worker runs this machine's Python: what that Python compiles, it compiles."""
        return False

    def reach(self) -> str | None:
        """Reach where it runs, once before any kernel: why that failed, in one line (the runner
        then closed), or None."""
        return None


class WorkerRunner(Runner):
    """Runs jobs in a warm worker: the worker protocol over the transport ``launch`` starts (a local
    process by default; ``remote.RemoteRunner`` gives ssh's). ``fresh_each_run`` gives every run a
    new process (strict)."""

    def __init__(self, config: WorkerConfig | None = None, fresh_each_run: bool = False, prestart: bool = False,
                 launch: Launcher = local_process):
        self.config = config or WorkerConfig()
        self.fresh_each_run = fresh_each_run
        self._launch = launch
        self._worker: WorkerProcess | None = None
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._cancel_reason = REPLACED
        self._run_id = ""  # the job in flight (or last run)
        self._measuring: Measuring | None = None  # the calibration the run in flight asked for
        self._reads = ReadRules(self.config.readable)
        if prestart:
            self._ensure_worker()

    def describe(self) -> dict[str, Any]:
        return dict(self._ensure_worker().info)

    @property
    def gpu(self) -> str:
        return self.config.gpu

    @property
    def runs_here(self) -> bool:
        return self._launch is local_process

    @property
    def cancelled(self) -> bool:
        """The run in flight (or the last) was cancelled."""
        return self._cancelled.is_set()

    @property
    def warm(self) -> bool:
        with self._lock:
            return self._worker is not None and self._worker.alive()

    def _ensure_worker(self) -> WorkerProcess:
        with self._lock:
            if self._worker is None or not self._worker.alive():
                if self._worker is not None:
                    self._worker.kill()  # died between jobs: end what it left behind before replacing it
                worker = WorkerProcess(self._launch(self.config))
                try:
                    worker.wait_ready()
                except BaseException:
                    worker.kill()  # what it left behind too (a remote worker, a temp folder)
                    raise
                self._worker = worker
            return self._worker

    def discard_worker(self) -> None:
        """End the warm worker (it is replaced on the next run)."""
        with self._lock:
            if self._worker is not None:
                self._worker.kill()
                self._worker = None

    def cancel(self, reason: str = REPLACED, run_id: str | None = None) -> None:
        """Stop the run in flight (from any thread): its worker's process group is killed; the run
        ends ``cancelled`` with the message ``reason``. With ``run_id``, only if that run is the one
        in flight: a cancel that arrives late never ends the next kernel's run."""
        if run_id is not None:
            with self._lock:  # held while killing: the next job cannot take this worker meanwhile
                if run_id != self._run_id:
                    return
                self._cancel_reason = reason
                self._cancelled.set()
                if self._worker is not None:
                    self._worker.kill()
            return
        self._cancel_reason = reason
        self._cancelled.set()
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.kill()

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def run(self, job: Job) -> Iterator[Event]:
        with self._lock:
            self._run_id = job.run_id
            self._cancelled.clear()
            self._cancel_reason = REPLACED
        fresh = self.fresh_each_run or job.options.strict
        widened = [self._allow_writes(job), self._allow_reads(job), self._sandbox_for(job)]
        if fresh or any(widened):  # strict: nothing a previous version left in the process survives
            self.discard_worker()
        worker = self._ensure_worker()
        info = worker.info
        yield RunStarted(
            job.run_id,
            kernel=job.kernel_id,
            path=job.kernel_path,
            version=job.version,
            content_hash=job.content_hash,
            reference=job.reference_path,
            reference_hash=job.reference_hash,
            tier=info.get("tier", "?"),
            device=info.get("device", "?"),
            arch=info.get("arch", "?"),
            run_dir=job.run_dir,
            strict=job.options.strict,
            gpu=self.config.gpu,
            gpu_uuid=self.config.gpu_uuid,
            confined=info.get("confined"),
            confinement=info.get("confinement", ""),
        )
        started = time.monotonic()
        worker.send(job)
        try:
            for event in self._follow(worker, job, started):
                yield self._placed(event)
        except GeneratorExit:
            # Nobody reads this run any more (``ktui run | head -1``): the worker would climb on
            # for no one, and its late events would reach the next job.
            self.discard_worker()
            raise
        finally:
            self._end_measuring()  # a calibration ends with the run that asked for it
        if fresh:
            self.discard_worker()

    def _measure(self, worker: WorkerProcess) -> None:
        """The worker asked for its GPU's calibration: measured beside it, one at a time."""
        if self._measuring is None or not self._measuring.running:
            self._measuring = Measuring(worker)

    def _end_measuring(self) -> None:
        if self._measuring is not None:
            self._measuring.stop()
            self._measuring = None

    def _placed(self, event: Event) -> Event:
        """A worker pinned to one GPU of several names it in the run's summary (``ran_on``, as a Ray run's does)."""
        if isinstance(event, RunFinished) and self.config.pin_gpu:
            event.summary = {**event.summary, "ran_on": {"node": socket.gethostname(), "gpu": self.config.gpu,
                                                         "gpu_uuid": self.config.gpu_uuid}}
        return event

    def _allow_writes(self, job: Job) -> bool:
        """Let the workers write the job's ``.ktui/runs`` folder; True when the warm one may not yet
        (a job of another workspace): it must be replaced, its confinement is fixed at its start."""
        runs = statedir.runs_root(job.run_dir) if job.run_dir else None
        if runs is None or str(runs) in self.config.writable:
            return False
        self.config = dataclasses.replace(self.config, writable=(*self.config.writable, str(runs)))
        return True

    def _allow_reads(self, job: Job) -> bool:
        """Let the workers read the job's workspace (``dispatch.readable``); True when the warm one
        may not yet, or reads it as it was before a new entry or a replaced file."""
        replace = self._reads.admit(job)
        if self._reads.paths != self.config.readable:
            self.config = dataclasses.replace(self.config, readable=self._reads.paths)
        return replace

    def _sandbox_for(self, job: Job) -> bool:
        """The network and the compiler caches the job's options ask for (``--allow-network``; a
        strict run's caches of its own); True when the warm worker was confined otherwise."""
        wanted = dataclasses.replace(self.config, allow_network=job.options.allow_network,
                                     fresh_caches=job.options.strict)
        if wanted == self.config:
            return False
        self.config = wanted
        return True

    def _follow(self, worker: WorkerProcess, job: Job, started: float) -> Iterator[Event]:
        rung: str | None = None
        deadline = time.monotonic() + BETWEEN_RUNGS_TIMEOUT_S
        limit = BETWEEN_RUNGS_TIMEOUT_S
        # The job ends when the worker says so on stdout (``job_done``) and its printed output has
        # ended on stderr (``output_end``): the run_finished waits for both, so the job's last
        # printed line (even without its newline) comes before it, never in the next job.
        finish: RunFinished | None = None
        done: dict | None = None
        output_ended = False
        unmasked: dict[str, list[str]] = {}  # the compile rung's unmasked loads and stores: a CPU-tier crash points at them
        while True:
            if done is not None and output_ended:
                yield from self._job_done(worker, finish, done)
                return
            try:
                kind, payload = worker.messages.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                if done is not None:  # the end-of-output mark never came (user code closed fd 2)
                    yield from self._job_done(worker, finish, done)
                    return
                dump = stacks.ask_for_stack(worker)
                worker.kill()
                self._drop(worker)
                where = rung or "between rungs"
                message = f"{where} exceeded its {limit:g} s limit; the worker was killed"
                if rung:
                    message += f" (--timeout {rung_family(rung)}=SECONDS raises it)"
                message, error = stacks.timeout_place(message, dump, job.root)
                if rung:
                    yield RungFinished(job.run_id, rung=rung, status=TIMED_OUT, message=message, duration_s=limit,
                                       error=error)
                yield RunFinished(job.run_id, verdict=TIMED_OUT, message=message, duration_s=_since(started),
                                  summary={"first_failure": first_failure(rung or "", TIMED_OUT, message)})
                return
            if kind == "stderr":
                yield Output(job.run_id, text=payload)
                continue
            if kind == "output_end":
                output_ended = True
                continue
            if kind == "eof":
                status = worker.exit_status()
                worker.kill()  # dead already: what it started is still to be ended
                self._drop(worker)
                if self._cancelled.is_set():
                    message = self._cancel_reason
                    verdict = CANCELLED
                else:
                    message = with_hint(crash_message(rung, status, worker.last_output(),
                                                      worker.killed_by_oom()), rung or "",
                                        worker.info.get("tier", ""), unmasked, os.path.relpath(job.kernel_path, job.root))
                    verdict = CRASHED
                if rung:
                    yield RungFinished(job.run_id, rung=rung, status=verdict, message=message)
                yield RunFinished(job.run_id, verdict=verdict, message=message, duration_s=_since(started),
                                  summary={"first_failure": first_failure(rung or "", verdict, message)})
                return
            kind = payload.get("type")
            if kind == "job_done":
                done = payload
                deadline = time.monotonic() + OUTPUT_END_GRACE_S
                continue
            if kind == ASK:
                self._measure(worker)
                continue
            event = event_from_json(payload)
            if isinstance(event, RungStarted):
                rung = event.rung
                limit = event.timeout_s or job.options.timeout_for(event.rung)
                deadline = time.monotonic() + limit
            elif isinstance(event, RungFinished):
                if event.rung == "compile":
                    unmasked = unmasked_of(event.figures)
                rung = None
                limit = BETWEEN_RUNGS_TIMEOUT_S
                deadline = time.monotonic() + limit
            elif isinstance(event, RunFinished):
                finish = event
                continue
            yield event

    def _job_done(self, worker: WorkerProcess, finish: RunFinished | None, done: dict) -> Iterator[Event]:
        if finish is not None:
            yield finish
        if not done.get("healthy", True):
            worker.kill()
            self._drop(worker)

    def _drop(self, worker: WorkerProcess) -> None:
        with self._lock:
            if self._worker is worker:
                self._worker = None


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)
