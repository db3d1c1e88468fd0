"""The worker protocol: the conversation with one worker over its transport.

The worker says ``ready`` (its tier, device, confinement) as one JSON line on stdout; a job goes
to it as one JSON line on stdin; its events come back as JSON lines on stdout, ``job_done`` last;
what user code prints arrives on stderr, a job's output ended by ``OUTPUT_END``. During a job the
worker may ask for a calibration of its GPU (``ktui.measure.calibrate.ASK``), which it may not
measure and keep itself: the answers go to it on stdin (``answer``; ``ktui.dispatch.calibrate``). ``WorkerProcess``
reads both streams on threads of their own into one queue of messages, and keeps the last lines
printed for the message of a worker that dies. Where the process runs, and how it is signalled
and ended, is its transport's (``ktui.dispatch.transport``).
"""

from __future__ import annotations

import collections
import json
import queue
import threading
import time
from typing import IO, Any, Iterator

from ktui.dispatch.transport import Transport
from ktui.protocol import processes
from ktui.protocol.bounds import LINE_CHARS, QUOTE_CHARS, cut, dropped_note
from ktui.protocol.job import Job
from ktui.protocol.processes import describe_exit

READY_TIMEOUT_S = 240.0  # importing torch + triton on a cold machine
STDERR_TAIL = 400  # lines: a crash message uses the last few, a stack dump up to all


class WorkerStartError(RuntimeError):
    pass


class WorkerProcess:
    """One worker, spoken to over ``transport`` (``proc``), with reader threads for its two output streams."""

    def __init__(self, transport: Transport):
        self.proc = transport
        self.messages: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.lines_seen = 0  # every stderr line so far (the tail keeps the last STDERR_TAIL)
        self.info: dict[str, Any] = {}
        self._input = threading.Lock()  # one line at a time on its stdin: a job, or an answer to its ask
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            try:
                self.messages.put(("msg", json.loads(line)))
            except json.JSONDecodeError:
                self._output(line)
        self.messages.put(("eof", None))

    def _read_stderr(self) -> None:
        for line in bounded_lines(self.proc.stderr, LINE_CHARS):  # the last line is read even without its newline
            if not self.proc.aside(line):
                self._output(line)

    def _output(self, line: str) -> None:
        """A line the worker printed: forwarded, and kept for the message if the worker dies.
        ``OUTPUT_END`` ends a job's output; text before it on its line is that job's last line."""
        line = line.rstrip("\n")
        ended = line.endswith(processes.OUTPUT_END)
        line = cut(line[: -len(processes.OUTPUT_END)] if ended else line, LINE_CHARS)
        if line or not ended:
            self.stderr_tail.append(line)
            self.lines_seen += 1
            self.messages.put(("stderr", line))
        if ended:
            self.messages.put(("output_end", None))

    def last_output(self, lines: int = 12) -> list[str]:
        """What the worker printed last in this job, once its stderr is read to the end: a dying
        process's last words (``realloc(): invalid pointer``) can reach us after its stdout closed."""
        self._stderr_reader.join(timeout=2.0)
        return [line for line in list(self.stderr_tail)[-lines:] if line.strip()]

    def exit_status(self) -> int | None:
        """How the worker ended, once it has: waited for, and its stderr read to the end (a
        transport may learn the status there: a remote worker's, from the agent)."""
        self.proc.wait()
        self._stderr_reader.join(timeout=2.0)
        return self.proc.returncode

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
                status = self.exit_status()
                tail = "\n".join(self.stderr_tail)
                raise WorkerStartError(f"the worker exited during start-up ({describe_exit(status)}):\n{tail}")

    def signal_stack(self, signum: int = processes.STACK_SIGNAL) -> None:
        """Ask the worker for every thread's Python stack on its stderr (``ktui.dispatch.stacks``)."""
        self.proc.signal(signum)

    def send(self, job: Job) -> None:
        self.stderr_tail.clear()  # a crash names what this job printed, not the previous kernel
        self.proc.job_started()
        with self._input:
            self.proc.stdin.write(json.dumps(job.to_json()) + "\n")
            self.proc.stdin.flush()

    def answer(self, message: dict[str, Any]) -> bool:
        """Write one line of an answer to what the worker asked (from any thread); False when the
        worker is gone (its run ends as a dead worker's does)."""
        try:
            with self._input:
                self.proc.stdin.write(json.dumps(message) + "\n")
                self.proc.stdin.flush()
        except (OSError, ValueError):  # a broken pipe, or its stdin closed by a kill
            return False
        return True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def killed_by_oom(self) -> str:
        """Evidence that the out-of-memory killer ended this dead worker, in words; "" with none."""
        return self.proc.killed_by_oom()

    def kill(self) -> None:
        """Kill the worker and everything user code started; safe on a worker that is already dead."""
        self.proc.kill()

    def close(self) -> None:
        """End the worker for good, at once: it is idle (its last job's events are read)."""
        self.proc.close()


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
