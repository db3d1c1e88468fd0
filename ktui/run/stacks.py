"""Where a kernel was when its time ran out: the worker's Python stack, asked for before the kill.

The worker registers ``faulthandler`` for ``STACK_SIGNAL``; on a timeout the parent sends it,
gives the dump a moment to arrive on the stderr pipe, and reads back the innermost frame in the
user's own files (the kernel, its reference, their helpers), so the message says
``stopped at kernels/hang.py:20 in custom_kernel`` instead of only "exceeded its limit".
"""

from __future__ import annotations

import linecache
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from ktui.protocol.events import SourceLocation

STACK_WAIT_S = 1.0  # how long the dump may take to arrive
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
PACKAGE = str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str


def ask_for_stack(worker, wait_s: float = STACK_WAIT_S) -> list[str]:
    """Signal ``worker`` (a ``WorkerProcess``) and return the lines its dump added on stderr."""
    seen = worker.lines_seen
    try:
        worker.signal_stack()  # a remote worker is signalled on its own host
    except (ProcessLookupError, PermissionError):
        return []
    deadline = time.monotonic() + wait_s
    last = seen
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if worker.lines_seen > last:  # still arriving
            last = worker.lines_seen
            continue
        if last > seen:
            break
    new = min(worker.lines_seen - seen, len(worker.stderr_tail))
    return list(worker.stderr_tail)[-new:] if new else []


def user_frame(dump: list[str], root: str) -> Frame | None:
    """The innermost frame inside ``root`` (the workspace) and not in ktui: user code runs on the
    ladder's thread only, so the first such frame of any thread is where the kernel was."""
    frames = []
    for line in dump:
        match = _FRAME.match(line)
        if match:
            frames.append(Frame(match["file"], int(match["line"]), match["func"]))
    for frame in frames:  # faulthandler lists the innermost call first
        path = os.path.abspath(frame.file)
        if path.startswith(os.path.abspath(root) + os.sep) and not path.startswith(PACKAGE + os.sep):
            return frame
    return None


def location(frame: Frame) -> SourceLocation:
    """Where ``frame`` is, with its source line, for the rung's error."""
    excerpt = linecache.getline(frame.file, frame.line).rstrip()
    return SourceLocation(frame.file, frame.line, excerpt=f"{frame.line:>4} | {excerpt}", first_line=frame.line)
