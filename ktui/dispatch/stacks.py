"""Where a kernel was when its time ran out: the worker's Python stack, asked for before the kill.

The worker registers ``faulthandler`` for ``STACK_SIGNAL``; on a timeout the parent sends it (and,
when nothing answers, ``STACK_SIGNAL_ASIDE``: see ``ktui.worker.stack_request``), reads the dump
from the stderr pipe until it is complete, and reads back the innermost frame in the user's own
files (the kernel, its reference, their helpers), so the message says
``stopped at kernels/hang.py:20 in custom_kernel`` instead of only "exceeded its limit".

faulthandler writes every thread's block, the newest thread first and the main thread last, and
the main thread's block ends with the outermost frame of a ``python -m`` process (runpy's
``_run_module_as_main``; the worker always starts so): that line ends the dump. A pause in the
middle of the dump (a loaded machine) is not its end, which a quiet gap took it for, losing the
main thread's block where the kernel was.
"""

from __future__ import annotations

import linecache
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.protocol.events import ErrorInfo, SourceLocation
from ktui.protocol.processes import STACK_SIGNAL_ASIDE

STACK_WAIT_S = 5.0  # how long the dump may take to arrive in full
STACK_WAIT_ENV = "KTUI_STACK_WAIT_S"  # another limit: a starved machine (tests beside other work) needs more
ASIDE_AFTER_S = 1.5  # silence after the first request that sends the second (the worker's own thread)
POLL_S = 0.02
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
OUTERMOST = "_run_module_as_main"  # the main thread's last frame in a ``python -m`` process's dump
PACKAGE = str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


@dataclass(frozen=True)
class Dump:
    """The lines the worker's stack dump added on stderr, and whether its end arrived."""

    lines: list[str]
    complete: bool
    waited_s: float = STACK_WAIT_S  # the longest it was waited for


def stack_wait_s() -> float:
    """``STACK_WAIT_S``, or the seconds ``KTUI_STACK_WAIT_S`` says (the wait ends as soon as the dump is whole)."""
    try:
        return float(os.environ.get(STACK_WAIT_ENV) or STACK_WAIT_S)
    except ValueError:
        return STACK_WAIT_S


def ask_for_stack(worker, wait_s: float | None = None) -> Dump:
    """Signal ``worker`` (a ``WorkerProcess``) and read its dump until it is complete, for at most
    ``wait_s``: what arrived by then, and whether that was all of it. When no line answers the
    first request within ``ASIDE_AFTER_S``, the request goes again to the thread the worker keeps
    for it (``ktui.worker.stack_request``)."""
    wait_s = stack_wait_s() if wait_s is None else wait_s
    seen = worker.lines_seen
    try:
        worker.signal_stack()  # a remote worker is signalled on its own host
    except (ProcessLookupError, PermissionError):
        return Dump([], False, 0.0)
    started = time.monotonic()
    asked_aside = False
    while True:
        lines = _since(worker, seen)
        if dump_complete(lines):
            return Dump(lines, True, wait_s)
        waited = time.monotonic() - started
        if waited >= wait_s:
            return Dump(lines, False, wait_s)
        if not lines and not asked_aside and waited >= min(ASIDE_AFTER_S, wait_s / 2):
            asked_aside = True
            try:
                worker.signal_stack(STACK_SIGNAL_ASIDE)
            except (ProcessLookupError, PermissionError):
                return Dump([], False, waited)
        time.sleep(POLL_S)


def dump_complete(lines: list[str]) -> bool:
    """Whether ``lines`` hold a whole faulthandler dump: the main thread's outermost frame is there."""
    return any((match := _FRAME.match(line)) and match["func"] == OUTERMOST for line in lines)


def _since(worker, seen: int) -> list[str]:
    new = min(worker.lines_seen - seen, len(worker.stderr_tail))
    return list(worker.stderr_tail)[-new:] if new > 0 else []


def user_frame(dump: list[str], root: str) -> Frame | None:
    """The innermost frame inside ``root`` (the workspace) and not in ktui: user code runs on the
    ladder's thread only, so the first such frame of any thread is where the kernel was."""
    frames = []
    for line in dump:
        match = _FRAME.match(line)
        if match:
            frames.append(Frame(match["file"], int(match["line"]), match["func"]))
    for frame in frames:  # faulthandler lists the innermost call first
        if frame.file.startswith("<"):  # code made at run time ("<string>"): no file, not the user's line
            continue
        path = os.path.abspath(frame.file)
        if path.startswith(os.path.abspath(root) + os.sep) and not path.startswith(PACKAGE + os.sep):
            return frame
    return None


def timeout_place(message: str, dump: Dump, root: str) -> tuple[str, ErrorInfo | None]:
    """A timeout's ``message`` with where the kernel was, and the error that keeps the stack; when
    the dump names no frame of the workspace, the message says why instead."""
    frame = user_frame(dump.lines, root)
    stack = "\n".join(dump.lines)
    if frame is not None:
        message += f"; it was at {os.path.relpath(frame.file, root)}:{frame.line} in {frame.function}"
        return message, ErrorInfo("TimeoutError", message, stack, location(frame))
    if dump.complete:
        message += "; its Python stack has no frame in the workspace's files"
    elif dump.lines:
        message += f"; where it was is unknown: its Python stack had not arrived in full after {dump.waited_s:g} s"
    else:
        message += f"; where it was is unknown: it wrote no Python stack within {dump.waited_s:g} s of being asked"
    return message, ErrorInfo("TimeoutError", message, stack) if stack else None


def location(frame: Frame) -> SourceLocation:
    """Where ``frame`` is, with its source line, for the rung's error."""
    excerpt = linecache.getline(frame.file, frame.line).rstrip()
    return SourceLocation(frame.file, frame.line, excerpt=f"{frame.line:>4} | {excerpt}", first_line=frame.line)
