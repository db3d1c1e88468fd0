"""What user code started: finding and ending it, so that nothing it started outlives its run.

User code may start processes (``subprocess.Popen``), also in sessions of their own
(``start_new_session``), where killing the worker's process group does not reach them. So:

- the worker is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): whatever its descendants
  orphan is reparented to it, not to init, and stays in its tree of descendants;
- at the end of every job it kills its whole tree (``end_descendants``);
- its parent, when it kills or replaces the worker, kills the worker's tree first, and after the
  worker died, every process still carrying the worker's token in its environment (what the
  dead worker orphaned went to init and left the tree; see ``tagged``);
- a watchdog thread in the worker kills the worker and its tree when the parent dies (a
  ``kill -9`` of the watcher), even while the main thread is stuck in a hung kernel.

Standard library only: this module runs in both processes. Linux only; elsewhere each function
does what it can and otherwise nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

PR_SET_CHILD_SUBREAPER = 36
# Written by the worker on its stderr when a job's user code is done, before its run_finished: the
# parent then knows it has every byte the job printed, a last line without its newline included.
OUTPUT_END = "\x00ktui:end-of-job-output\x00"
# The NVTX range the profiled process (``ktui.worker.target``) pushes around the kernel's calls, and
# the one the profiler (``ktui.profiling.profile``) tells Nsight Compute to keep.
NVTX_RANGE = "ktui_custom_kernel"
# The stack request (ktui.dispatch.stacks): two real-time signals, which no library in the worker
# claims. SIGUSR1 and SIGUSR2 were used until LLVM (Triton's, and the copy in every other compiler
# the worker loads) was found to take both at its first pass manager run, in whichever thread
# compiles, holding Python's lock: a request that met LLVM's handler went unanswered. LLVM never
# touches a real-time signal. (Where there are none, macOS, the user signals are all there is.)
_REALTIME = hasattr(signal, "SIGRTMIN")
STACK_SIGNAL = signal.SIGRTMIN + 4 if _REALTIME else signal.SIGUSR1  # answered with every thread's Python stack on stderr
# The same request, received only by a thread the worker keeps for it (ktui.worker.stack_request):
# sent when the first went unanswered (the thread it reached may wait in the GPU driver).
STACK_SIGNAL_ASIDE = signal.SIGRTMIN + 5 if _REALTIME else signal.SIGUSR2
TOKEN_ENV = "KTUI_WORKER_TOKEN"  # set in the worker's environment, inherited by what user code starts
PARENT_ENV = "KTUI_WORKER_PARENT"  # the pid of the process that started the worker
# Confinement (ktui.worker.confine): the parent names what a worker may write and its temp folder.
NO_CONFINE_ENV = "KTUI_NO_CONFINE"  # "1": run user code unconfined
WRITABLE_ENV = "KTUI_WRITABLE"  # folders (os.pathsep) a worker's runs write: the workspaces' .ktui/runs
# Folders and files (os.pathsep) a worker's runs read: the workspaces (a folder is read as
# ``statedir.readable_entries`` says: never its state folder), a reference kept elsewhere.
READABLE_ENV = "KTUI_READABLE"
TMP_ENV = "KTUI_TMP"  # the worker's private temp folder, made and removed by the parent
COMPILE_AHEAD_ENV = "KTUI_COMPILE_AHEAD"  # N: a session's worker keeps N compile-ahead helpers, 0 none (ktui.worker.ahead)
HELPERS_IDLE_ENV = "KTUI_HELPERS_IDLE_S"  # seconds a worker waits for its next job before its compile-ahead helpers end
MAX_COMPILE_AHEAD = 8
WATCH_PARENT_S = 0.5


def compile_ahead_helpers(value: str | None) -> int | None:
    """``KTUI_COMPILE_AHEAD``'s count of helpers (None when unset: the worker's default,
    ``ktui.worker.ahead.pool.default_size``); ValueError, in one line, for anything but a whole
    number from 0 to ``MAX_COMPILE_AHEAD``: the parent refuses it before any worker starts."""
    if value is None or not value.strip():
        return None
    try:
        count = int(value)
    except ValueError:
        count = -1
    if not 0 <= count <= MAX_COMPILE_AHEAD:
        raise ValueError(f"{COMPILE_AHEAD_ENV} must be a whole number of helpers from 0 to {MAX_COMPILE_AHEAD}, "
                         f"got {value!r}")
    return count


def signal_name(signum: int) -> str:
    """``signum`` as a name another host resolves with its own C library: ``RTMIN+4`` for a real-time
    signal (its number differs between C libraries), else ``USR1``, ``KILL``…"""
    if _REALTIME and signal.SIGRTMIN <= signum <= signal.SIGRTMAX:
        return f"RTMIN+{signum - signal.SIGRTMIN}"
    return signal.Signals(signum).name.removeprefix("SIG")


def signal_number(name: str) -> int:
    """The number of ``signal_name``'s ``name`` here; ValueError for a name this host lacks."""
    if name.startswith("RTMIN+") and _REALTIME:
        signum = signal.SIGRTMIN + int(name.removeprefix("RTMIN+"))
        if signum <= signal.SIGRTMAX:
            return signum
        raise ValueError(f"no signal {name} here")
    try:
        return signal.Signals["SIG" + name]
    except KeyError:
        raise ValueError(f"no signal {name} here") from None


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children instead of init's."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid → parent pid, for every process in /proc."""
    table: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                table[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return table


def descendants(pid: int, spare: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Every process below ``pid`` (children, their children, …), nearest first; ``spare``'s
    processes and what is below them are left out."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(0), []):
            if child in spare:
                continue
            found.append(child)
            todo.append(child)
    return found


def tagged(token: str, exclude: tuple[int, ...] = ()) -> list[int]:
    """Processes whose environment carries ``token`` (those of this user: others' are unreadable)."""
    needle = f"{TOKEN_ENV}={token}".encode()
    found = []
    for pid in _parents():
        if pid in exclude or pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:
            continue
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def end_descendants(rounds: int = 5, keep: set[int] | frozenset[int] = frozenset()) -> int:
    """In the worker: kill everything below it but ``keep`` (its own helpers, with what they run)
    and reap it; return how many were killed.

    A few rounds, because a process may fork between the listing and the kill."""
    killed = 0
    for _ in range(rounds):
        tree = [pid for pid in descendants(os.getpid(), spare=keep) if not _is_zombie(pid)]
        if not tree:
            break
        kill_all(tree)
        killed += len(tree)
        time.sleep(0.01)
        reap()
    reap()
    return killed


def reap() -> None:
    """Collect this process's dead children (as a subreaper it inherits user code's orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def watch_parent(parent: int, interval_s: float = WATCH_PARENT_S) -> threading.Thread | None:
    """In the worker: end it and its tree as soon as ``parent`` is no longer its parent.

    A thread, not ``PR_SET_PDEATHSIG``: that signal fires when the parent's *thread* that
    started the worker exits, and ktui starts workers from whichever thread needs one first."""
    if parent <= 0:
        return None

    def loop() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        kill_all(descendants(os.getpid()))
        try:
            os.killpg(os.getpgrp(), signal.SIGKILL)
        finally:
            os._exit(1)

    thread = threading.Thread(target=loop, name="ktui-parent-watch", daemon=True)
    thread.start()
    return thread


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone or a zombie: with the
    pid it names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def describe_exit(code: int | None) -> str:
    """A child's exit status in words: ``exit code 1``, ``killed by SIGKILL``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def stopped_by(signum: int) -> str:
    """The message of a run cancelled because ktui itself was stopped by a signal, the same on
    every surface (``ktui run``, the dashboard, headless watch): ``cancelled: stopped by SIGTERM``."""
    return f"cancelled: stopped by {signal.Signals(signum).name}"
