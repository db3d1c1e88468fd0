"""The ``profile`` and ``sanitize`` tools' engine: the CLI in a child process, progress out, cancellation in.

A call is ``python -m ktui profile|sanitize PATH --json`` (``ktui.dispatch.child``), the command an agent
would type, so ncu, compute-sanitizer and the kernel never run in the server's process. Its
progress lines become MCP progress notifications and its last JSON line is the answer. When the
client cancels the call, or the server stops, the child and every process group under it are
killed before the call returns, so nothing outlives it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ktui.dispatch.child import KtuiChild, ktui_argv
from ktui.workspace.kernels import Kernel

Progress = Callable[[float, str], Awaitable[None]]
POLL_S = 0.1
# The progress lines of ``ktui profile --json`` and ``ktui calibrate --json`` (sanitize prints none).
PROGRESS = ("profile_progress", "calibrate_progress")


@dataclass(frozen=True)
class ChildResult:
    """How the child ended: its last JSON line that is not progress (None if it printed none)."""

    final: dict[str, Any] | None
    returncode: int
    stderr_tail: str

    def describe_missing(self, what: str) -> str:
        return (f"{what} exited with code {self.returncode} without a result"
                + (f": {self.stderr_tail}" if self.stderr_tail else ""))


class ChildCalls:
    """The children of one server's tool calls; ``close`` kills those still running."""

    def __init__(self) -> None:
        self._live: set[KtuiChild] = set()
        self._lock = threading.Lock()

    async def call(self, verb: str, kernel: Kernel, flags: list[str], progress: Progress) -> ChildResult:
        """``ktui VERB`` on ``kernel`` (by the reference it is judged by) run to its end, or killed
        with all under it when this call is cancelled or fails."""
        return await self.call_argv(verb, ktui_argv(verb, kernel.path, kernel.reference, *flags), kernel.root, progress)

    async def call_argv(self, verb: str, argv: list[str], cwd: Path, progress: Progress) -> ChildResult:
        """``argv`` (``ktui VERB …``, ``ktui_argv``) in ``cwd``, as ``call``."""
        await progress(0, f"starting ktui {verb}")
        child = KtuiChild(argv, cwd)  # OSError: the caller's
        with self._lock:
            self._live.add(child)
        records: queue.Queue[dict[str, Any]] = queue.Queue()
        reader = threading.Thread(target=lambda: [records.put(r) for r in child.records()], daemon=True,
                                  name="ktui-mcp-child")
        reader.start()
        final: dict[str, Any] | None = None
        done = 0
        try:
            while reader.is_alive() or not records.empty():
                while True:
                    try:
                        record = records.get_nowait()
                    except queue.Empty:
                        break
                    if record.get("type") in PROGRESS:
                        done += 1
                        await progress(done, str(record.get("message", "")))
                    else:
                        final = record
                await anyio.sleep(POLL_S)
            code = await anyio.to_thread.run_sync(child.wait)
        except BaseException:  # cancelled, or the client went away
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(child.kill)
            raise
        finally:
            with self._lock:
                self._live.discard(child)
        return ChildResult(final, code, child.stderr_tail())

    def close(self) -> None:
        with self._lock:
            live = list(self._live)
        for child in live:
            child.kill()
