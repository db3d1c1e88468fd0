"""The stack request reaches a thread that can answer it (``ktui.worker.stack_request``): a thread
waiting in the GPU driver on a kernel that never ends may not run a handler, and on the H200 such
a hang's dump then never came."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from waits import SAFETY_S, until

from ktui.dispatch import stacks
from ktui.dispatch.runner import WorkerConfig
from ktui.dispatch.transport import Command, LocalProcess
from ktui.dispatch.worker_protocol import WorkerProcess
from ktui.protocol.processes import STACK_SIGNAL, STACK_SIGNAL_ASIDE

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads thread masks from /proc")

# Waits in a call no handler interrupts for the first request: STACK_SIGNAL is blocked in every
# thread, as it is in effect for a thread waiting in the GPU driver. ``wait`` is in ws/ (the workspace).
UNREACHABLE = '''
import signal, sys
from ktui.protocol.processes import STACK_SIGNAL
from ktui.worker import stack_request

signal.pthread_sigmask(signal.SIG_BLOCK, {STACK_SIGNAL})
stack_request.listen(sys.stderr)
sys.path.insert(0, "ws")
from waiting import wait

wait()
'''


def threads_that_can_receive(pid: int, signum: int) -> list[str]:
    """The ids of ``pid``'s threads that do not block ``signum`` (``SigBlk`` in their status)."""
    open_to = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines() if ":\t" in line)
        if not int(fields["SigBlk"], 16) >> (signum - 1) & 1:
            open_to.append(task.name)
    return open_to


@pytest.mark.worker
def test_a_ready_worker_keeps_one_thread_alone_able_to_take_the_second_request():
    worker = WorkerProcess(LocalProcess(WorkerConfig(force_cpu=True).command()))
    try:
        worker.wait_ready()
        threads = len(list(Path(f"/proc/{worker.proc.pid}/task").iterdir()))
        assert threads > 2  # torch's, the parent watch, the listener
        assert len(threads_that_can_receive(worker.proc.pid, STACK_SIGNAL_ASIDE)) == 1
        assert len(threads_that_can_receive(worker.proc.pid, STACK_SIGNAL)) == threads  # the first request: any thread
    finally:
        worker.kill()


@pytest.mark.worker
def test_a_first_request_no_thread_can_take_is_answered_through_the_kept_thread(tmp_path, monkeypatch):
    (tmp_path / "unreachable.py").write_text(textwrap.dedent(UNREACHABLE))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "waiting.py").write_text("import time\n\n\ndef wait():\n    time.sleep(600)\n")
    monkeypatch.chdir(tmp_path)
    worker = WorkerProcess(LocalProcess(Command("unreachable")))
    try:
        # its listener started, then its main thread asleep in wait() (the kernel's name for that sleep)
        asleep = Path(f"/proc/{worker.proc.pid}/wchan")
        assert until(lambda: asleep.read_text() == "hrtimer_nanosleep"), "it never reached wait()"
        dump = stacks.ask_for_stack(worker, wait_s=SAFETY_S)  # complete: answered, through the kept thread
        assert dump.complete, dump.lines
        frame = stacks.user_frame(dump.lines, str(tmp_path / "ws"))
        assert frame is not None and frame.function == "wait" and frame.line == 5, dump.lines
    finally:
        worker.kill()


@pytest.mark.worker
def test_a_handler_a_compiler_took_is_given_back_and_the_request_answered(tmp_path):
    """LLVM (loaded by Triton's first compile) installs its own SIGUSR1 handler: the request then went
    unanswered in a confined worker with a cold compiler cache. ``rearm`` takes it back."""
    import os
    import subprocess

    program = textwrap.dedent('''
        import os, signal, sys
        from ktui.protocol.processes import STACK_SIGNAL
        from ktui.worker import stack_request
        stack_request.listen(sys.stderr)
        signal.signal(STACK_SIGNAL, signal.SIG_IGN)  # another handler takes the signal, as LLVM's does
        stack_request.rearm()
        os.kill(os.getpid(), STACK_SIGNAL)
        print("asked", file=sys.stderr, flush=True)
    ''')
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=SAFETY_S,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    assert "most recent call first" in done.stderr and '<string>", line 8 in <module>' in done.stderr


# A process's first Triton compile, then the stack request at once: nothing in between could take
# a handler back. ``argv[1]``: an empty Triton cache, so the compile runs LLVM's pass managers.
FIRST_COMPILE = '''
import faulthandler, os, sys
os.environ["TRITON_CACHE_DIR"] = sys.argv[1]
from ktui.protocol.processes import STACK_SIGNAL, STACK_SIGNAL_ASIDE
from ktui.worker.stack_request import _handler
for signum in (STACK_SIGNAL, STACK_SIGNAL_ASIDE):
    faulthandler.register(signum, file=sys.stderr, all_threads=True)
before = {signum: _handler(signum) for signum in (STACK_SIGNAL, STACK_SIGNAL_ASIDE)}
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) * 2, mask=offsets < n)


source = ASTSource(fn=double, signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 128})
triton.compile(source, target=GPUTarget("cuda", 90, 32))
taken = [signum for signum, handler in before.items() if _handler(signum) != handler]
print("taken:", taken, file=sys.stderr, flush=True)
os.kill(os.getpid(), STACK_SIGNAL)
print("asked", file=sys.stderr, flush=True)
'''


@pytest.mark.worker
def test_a_request_right_after_the_first_compile_is_answered_for_no_compiler_takes_its_signals(tmp_path):
    """Triton's LLVM installs handlers for SIGUSR1 and SIGUSR2 at its first pass manager run (MLIR's
    crash reproducer), the signals the stack request used: a request then, before ``rearm`` took
    them back, went unanswered. The request's signals are ones LLVM never touches."""
    import os
    import subprocess

    (tmp_path / "first_compile.py").write_text(FIRST_COMPILE)
    (tmp_path / "cache").mkdir()
    done = subprocess.run([sys.executable, "first_compile.py", str(tmp_path / "cache")], capture_output=True, text=True,
                          timeout=SAFETY_S, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert done.returncode == 0, done.stderr
    assert "taken: []" in done.stderr, done.stderr
    dump = [line for line in done.stderr.splitlines() if line.startswith(("Current thread", "  File"))]
    asked = FIRST_COMPILE.splitlines().index("os.kill(os.getpid(), STACK_SIGNAL)") + 1
    assert dump and f'first_compile.py", line {asked} in <module>' in dump[-1], done.stderr
