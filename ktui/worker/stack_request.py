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
"""

from __future__ import annotations

import faulthandler
import signal
import threading
from typing import IO

from ktui.protocol.processes import STACK_SIGNAL, STACK_SIGNAL_ASIDE


def listen(file: IO[str]) -> threading.Thread:
    """Make both requests dump every thread's stack on ``file``, the second received by a thread of
    its own. Call it from the main thread before any other thread starts."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {STACK_SIGNAL_ASIDE})
    for signum in (STACK_SIGNAL, STACK_SIGNAL_ASIDE):
        faulthandler.register(signum, file=file, all_threads=True)
    ready = threading.Event()

    def wait_for_requests() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {STACK_SIGNAL_ASIDE})
        ready.set()
        threading.Event().wait()

    thread = threading.Thread(target=wait_for_requests, name="ktui-stack-request", daemon=True)
    thread.start()
    ready.wait()
    return thread
