"""Running jobs in worker processes: the warm worker, timeouts, crashes and cancellation.

The process that shows results never runs user code. A ``LocalRunner`` keeps one warm worker
(``python -m ktui.worker.main``) in its own process group, sends it a job and turns what comes back
into events. When the worker dies mid-run (segfault, ``os._exit``, killed) the run ends
``crashed`` with the signal and the last lines it printed; when a rung outlives its limit the whole
process group is killed and the run ends ``timed_out``; ``cancel`` kills it and the run ends
``cancelled``. A worker that ended any of these ways is replaced before the next job.

A remote GPU will be another class with the same ``run``/``cancel``/``close``.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from typing import IO, Any, Iterator, Protocol

from ktui.dispatch import stacks
from ktui.dispatch.oom import OomWatch
from ktui.dispatch.proc import child_env, end_tree
from ktui.dispatch.readable import ReadRules
from ktui.measure.masks import unmasked_of, with_hint
from ktui.protocol import processes, statedir
from ktui.protocol.bounds import LINE_CHARS, QUOTE_CHARS, cut, dropped_note
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
from ktui.protocol.processes import describe_exit

READY_TIMEOUT_S = 240.0  # importing torch + triton on a cold machine
OUTPUT_END_GRACE_S = 2.0  # after job_done, how long the end of the job's printed output may lag
BETWEEN_RUNGS_TIMEOUT_S = 120.0
STDERR_TAIL = 400  # lines: a crash message uses the last few, a stack dump up to all
REPLACED = "cancelled: a newer version replaced this run"  # why the dashboard cancels a run


class WorkerStartError(RuntimeError):
    pass


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

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.gpu} if self.pin_gpu and self.gpu else {}

    def argv(self) -> list[str]:
        args = [sys.executable, "-m", "ktui.worker.main"]
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


class WorkerProcess:
    """One ``python -m ktui.worker.main`` child with reader threads for its two output streams."""

    def __init__(self, config: WorkerConfig):
        self.config = config
        self.messages: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.lines_seen = 0  # every stderr line so far (the tail keeps the last STDERR_TAIL)
        self.token = uuid.uuid4().hex
        pinned = config.env() if isinstance(config, WorkerConfig) else {}  # other processes (an audit) see every GPU
        # Its private temp folder is made and removed here: confined, it could not remove it itself.
        self.tmp = tempfile.mkdtemp(prefix="ktui-worker-")
        writable = os.pathsep.join(getattr(config, "writable", ()))
        readable = os.pathsep.join(getattr(config, "readable", ()))
        env = child_env({**_tree_env(self.token), **pinned, processes.TMP_ENV: self.tmp,
                         processes.WRITABLE_ENV: writable, processes.READABLE_ENV: readable})
        self.proc = subprocess.Popen(
            config.argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            env=env,
            start_new_session=True,  # its own process group: killing it kills what user code spawned
        )
        self.info: dict[str, Any] = {}
        self.oom = OomWatch.of(self.proc.pid)  # a SIGKILL's likely sender, found when it dies
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.messages.put(("msg", json.loads(line)))
            except json.JSONDecodeError:
                self._output(line)
        self.messages.put(("eof", None))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in bounded_lines(self.proc.stderr, LINE_CHARS):  # the last line is read even without its newline
            self._output(line)

    def _output(self, line: str) -> None:
        """A line the worker printed: forwarded, and kept for the message if the worker dies.
        ``OUTPUT_END`` ends a job's output; text before it on its line is that job's last line."""
        line = line.rstrip("\n")
        ended = line.endswith(processes.OUTPUT_END)
        line = cut(line[: -len(processes.OUTPUT_END)] if ended else line, LINE_CHARS)
        if ended:
            if line:
                self.stderr_tail.append(line)
                self.lines_seen += 1
                self.messages.put(("stderr", line))
            self.messages.put(("output_end", None))
            return
        self.stderr_tail.append(line)
        self.lines_seen += 1
        self.messages.put(("stderr", line))

    def last_output(self, lines: int = 12) -> list[str]:
        """What the worker printed last in this job, once its stderr is read to the end: a dying
        process's last words (``realloc(): invalid pointer``) can reach us after its stdout closed."""
        self._stderr_reader.join(timeout=2.0)
        return [line for line in list(self.stderr_tail)[-lines:] if line.strip()]

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerStartError(f"the worker did not start within {timeout:.0f} s")
            try:
                kind, payload = self.messages.get(timeout=remaining)
            except queue.Empty:
                continue
            if kind == "msg" and payload.get("type") == "ready":
                self.info = payload
                return payload
            if kind == "eof":
                self.proc.wait()
                tail = "\n".join(self.stderr_tail)
                raise WorkerStartError(f"the worker exited during start-up ({describe_exit(self.proc.returncode)}):\n{tail}")

    def signal_stack(self, signum: int = processes.STACK_SIGNAL) -> None:
        """Ask the worker for every thread's Python stack on its stderr (``ktui.dispatch.stacks``)."""
        os.kill(self.proc.pid, signum)

    def send(self, job: Job) -> None:
        assert self.proc.stdin is not None
        self.stderr_tail.clear()  # a crash names what this job printed, not the previous kernel
        self.oom.job_started()
        self.proc.stdin.write(json.dumps(job.to_json()) + "\n")
        self.proc.stdin.flush()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def killed_by_oom(self) -> str:
        """Evidence that the out-of-memory killer ended this dead worker, in words; "" with none."""
        return self.oom.evidence() if self.proc.returncode == -signal.SIGKILL else ""

    def kill(self) -> None:
        """Kill the worker and everything user code started (also in sessions of its own, and
        what was reparented away from it); safe to call on a worker that is already dead."""
        end_tree(self.proc)
        _kill_orphans(self.token)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def close(self) -> None:
        """End the worker for good, at once: it is idle (its last job's events are read) and what
        it would do on its way out (torch's and Triton's exit hooks, the GPU context's release)
        concerns no one, yet waiting for it kept ``ktui run`` seconds past its verdicts. Its tree
        is killed now and reaped on a thread, which an exiting ``ktui`` does not wait for."""
        end_tree(self.proc, reap=False)
        _kill_orphans(self.token)
        shutil.rmtree(self.tmp, ignore_errors=True)
        threading.Thread(target=self.proc.wait, name="ktui-reap-worker", daemon=True).start()


def _tree_env(token: str) -> dict[str, str]:
    """What the worker needs to know to keep its descendants in check (``ktui.protocol.processes``):
    a token its descendants inherit, and the parent to outlive no longer than."""
    return {processes.TOKEN_ENV: token, processes.PARENT_ENV: str(os.getpid())}


def _kill_orphans(token: str) -> None:
    """After a worker died, what it started was reparented out of its tree: find it by the token."""
    processes.kill_all(processes.tagged(token))


class Runner(Protocol):
    """Anything that turns a Job into the loop's events."""

    def describe(self) -> dict[str, Any]: ...

    @property
    def warm(self) -> bool:
        """A worker is running, ready for the next job (what an idle daemon lets go)."""
        ...

    def run(self, job: Job) -> Iterator[Event]: ...

    def cancel(self, reason: str = ..., run_id: str | None = ...) -> None: ...

    def close(self) -> None: ...


class LocalRunner:
    """Runs jobs in a warm local worker; ``fresh_each_run`` gives every run a new process (strict)."""

    def __init__(self, config: WorkerConfig | None = None, fresh_each_run: bool = False, prestart: bool = False):
        self.config = config or WorkerConfig()
        self.fresh_each_run = fresh_each_run
        self._worker: WorkerProcess | None = None
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._cancel_reason = REPLACED
        self._run_id = ""  # the job in flight (or last run)
        self._reads = ReadRules(self.config.readable)
        if prestart:
            self._ensure_worker()

    def describe(self) -> dict[str, Any]:
        return dict(self._ensure_worker().info)

    @property
    def warm(self) -> bool:
        with self._lock:
            return self._worker is not None and self._worker.alive()

    def _ensure_worker(self) -> WorkerProcess:
        with self._lock:
            if self._worker is None or not self._worker.alive():
                if self._worker is not None:
                    self._worker.kill()  # died between jobs: end what it left behind before replacing it
                worker = WorkerProcess(self.config)
                worker.wait_ready()
                self._worker = worker
            return self._worker

    def _discard_worker(self) -> None:
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
            self._discard_worker()
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
            self._discard_worker()
            raise
        if fresh:
            self._discard_worker()

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
        wanted = {"allow_network": job.options.allow_network, "fresh_caches": job.options.strict}
        if all(getattr(self.config, name) == value for name, value in wanted.items()):
            return False
        self.config = dataclasses.replace(self.config, **wanted)
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
                worker.proc.wait()
                worker.kill()  # dead already: what it started is still to be ended
                self._drop(worker)
                if self._cancelled.is_set():
                    message = self._cancel_reason
                    verdict = CANCELLED
                else:
                    message = with_hint(crash_message(rung, worker.proc.returncode, worker.last_output(),
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


def bounded_lines(stream: IO[str], chars: int) -> Iterator[str]:
    """The lines of ``stream``, each cut to its first ``chars`` characters: the rest of a longer
    line is read in pieces and dropped, counted, so one 50 MB line is never held whole. A job's
    end mark (``OUTPUT_END``) after a cut line stays at its end."""
    mark = processes.OUTPUT_END
    while True:
        line = stream.readline(chars)
        if not line:
            return
        if line.endswith("\n") or len(line) < chars:
            yield line
            continue
        dropped, tail = 0, ""
        while more := stream.readline(chars):
            dropped += len(more)
            tail = (tail + more)[-(len(mark) + 1):]
            if more.endswith("\n"):
                break
        end = mark if tail.rstrip("\n").endswith(mark) else ""
        dropped -= len(end) + tail.endswith("\n")
        yield (line + dropped_note(dropped) if dropped else line) + end + "\n"


def crash_message(rung: str | None, returncode: int | None, last: list[str], oom: str = "") -> str:
    """How a dead worker is reported. The first line is what one-line views show (the CLI's rung
    line, the summary, ``ktui history``), so it carries the last thing the worker printed; the
    lines before it follow. ``oom``: the evidence that the out-of-memory killer sent its SIGKILL."""
    message = f"the worker died in {rung or 'the ladder'} ({describe_exit(returncode)})" + (f": {oom}" if oom else "")
    if not last:
        return message
    message += f"; its last output: {cut(last[-1].strip(), QUOTE_CHARS)}"
    if len(last) > 1:
        message += "\n" + "\n".join(cut(line, QUOTE_CHARS) for line in last)
    return message


def _since(started: float) -> float:
    return round(time.monotonic() - started, 3)
