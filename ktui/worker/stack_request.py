"""The worker's answer to the parent's stack request (``ktui.dispatch.stacks``), twice over.

``STACK_SIGNAL`` goes to whichever thread of the worker the kernel picks; faulthandler's handler
runs there and writes every thread's stack — the interrupted thread's own frames read while they
stand still, which is what places a kernel hanging in Python (Triton's interpreter) on its line.
But a thread waiting in the GPU driver (a kernel that never ends, under ``cudaDeviceSynchronize``)
may not run a handler until that wait returns, and on the H200 such a hang's dump never came.

So a second signal, ``STACK_SIGNAL_ASIDE``, is blocked in the main thread before any other thread
exists (every later thread, CUDA's and user code's included, inherits the mask) and unblocked in
one thread that only waits: the kernel can deliver it nowhere else, and the handler (C, no GIL
needed) writes every stack from there. The parent sends it when the first request went unanswered.
Processes the worker starts inherit the blocked signal; the compile-ahead helpers unblock it.

Both are real-time signals (``ktui.protocol.processes``). They were SIGUSR1 and SIGUSR2 until LLVM,
loaded by every compiler the worker runs (Triton's, CuTeDSL's, TVM's), was found to install handlers
of its own for both at its first pass manager run (MLIR's crash reproducer registers LLVM's signal
handlers: SIGUSR1 is one of its "info" signals, SIGUSR2 one it re-raises), in whichever thread
compiles. A request meeting LLVM's handler went unanswered, and the second was written from the
waiting thread while the kernel's thread ran on, ending mid-stack. Taking the handlers back
afterwards (``rearm``, every ``REARM_S`` and before every rung) left a window after each process's
first compile (a rung whose limit ends during or just after a compile: a GPU run's first launch,
user code that compiles); LLVM never touches a real-time signal, so there is no window. ``rearm``
stays, for code that sets a handler for them anyway (user code may).
"""

from __future__ import annotations

import ctypes
import faulthandler
import signal
import threading
from typing import IO

from ktui.protocol.processes import STACK_SIGNAL, STACK_SIGNAL_ASIDE

_LIBC = ctypes.CDLL(None, use_errno=True)
REARM_S = 0.5  # how soon the handlers are back after other code took them
_answering: list[IO[str]] = []  # the file the dumps go to, once ``listen`` ran


def listen(file: IO[str]) -> threading.Thread:
    """Make both requests dump every thread's stack on ``file``, the second received by a thread of
    its own. Call it from the main thread before any other thread starts."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {STACK_SIGNAL_ASIDE})
    _answering[:] = [file]
    rearm()
    ready = threading.Event()

    def wait_for_requests() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {STACK_SIGNAL_ASIDE})
        ready.set()
        while not threading.Event().wait(REARM_S):
            rearm()

    thread = threading.Thread(target=wait_for_requests, name="ktui-stack-request", daemon=True)
    thread.start()
    ready.wait()
    return thread


_ours: dict[int, int | None] = {}  # each signal's handler as faulthandler set it


def rearm() -> None:
    """Set a handler that other code took back to faulthandler's. ``faulthandler.register``
    alone keeps a registration it has, so the signal is unregistered first: the moment between is
    the only one a request could meet the default action, and only after a takeover, when it
    would have gone unanswered anyway."""
    for file in _answering:
        for signum in (STACK_SIGNAL, STACK_SIGNAL_ASIDE):
            current = _handler(signum)
            if signum in _ours and current == _ours[signum]:
                continue
            if signum in _ours:
                faulthandler.unregister(signum)
            faulthandler.register(signum, file=file, all_threads=True)
            _ours[signum] = _handler(signum)


def _handler(signum: int) -> int | None:
    """The address of the process's handler of ``signum`` (sigaction's first field), None if unknown."""
    action = ctypes.create_string_buffer(256)  # larger than any libc's struct sigaction
    if _LIBC.sigaction(signum, None, action) != 0:
        return None
    return ctypes.c_void_p.from_buffer(action).value
