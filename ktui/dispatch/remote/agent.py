"""What runs on the remote, started over ssh as ``python -m ktui.dispatch.remote.agent VERB``.

Standard library and ``ktui.protocol`` only (it runs next to the synced copy of ktui):

- ``launch ARGS``: starts the worker (``python -m ktui.worker.main ARGS``) in a process group of
  its own, says its pid, and ends it and everything it started as soon as the ssh session is
  gone (a dropped link leaves nothing running there); says the worker's exit status at the end.
- ``kill PGID TOKEN``: the worker's group and whatever carries its token (cancel, replace).
- ``signal NAME PID``: sends the signal ``processes.signal_name`` named (a stack request) to the
  worker, its number resolved here.
- ``prepare WS RUN_DIR``: reads the synced file list (NUL-separated) on stdin, removes the files
  of ``WS`` that are no longer in it, creates ``RUN_DIR``.
- ``tool SECONDS [NAME=VALUE ...] -- ARGV``: runs a tool (ncu, compute-sanitizer, the target) in
  a process group of its own with that time limit, its output on stdout, then its exit status on
  stderr; the group ends at the limit, or as soon as the ssh session is gone.
- ``beside MODULE ARGS``: runs ktui's ``python -m MODULE ARGS`` beside the worker (the calibration's
  measuring process, which the worker asked for), not confined, in a process group of its own, its
  output streamed as it comes; it ends as soon as the ssh session is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from ktui.protocol import processes

PID_MARK = "\x00ktui:remote-worker-pid:"
EXIT_MARK = "\x00ktui:remote-worker-exit:"
TOOL_MARK = "\x00ktui:remote-tool-exit:"
MARK_END = "\x00"


def launch(args: list[str]) -> int:
    env = dict(os.environ)
    env[processes.PARENT_ENV] = str(os.getpid())
    # The worker starts in <base>/ws; its runs' folders are <base>/runs/<run id> (RemoteRunner.stage):
    # the one folder its confinement lets it write, besides its temp folder and the caches.
    base = os.path.dirname(os.getcwd())
    runs = os.path.join(base, "runs")
    os.makedirs(runs, exist_ok=True)
    env[processes.WRITABLE_ENV] = runs
    # What its runs read: the workspace, and the GPU MODE modules kept outside it (RemoteRunner._send_outside).
    env[processes.READABLE_ENV] = os.pathsep.join([os.getcwd(), os.path.join(base, "outside")])
    worker = subprocess.Popen([sys.executable, "-m", "ktui.worker.main", *args], env=env, start_new_session=True)
    sys.stderr.write(f"{PID_MARK}{worker.pid}{MARK_END}\n")
    sys.stderr.flush()
    session = os.getppid()  # sshd's process for this session: it ends when the link does

    def watch() -> None:
        while os.getppid() == session:
            time.sleep(processes.WATCH_PARENT_S)
        end(worker.pid, env.get(processes.TOKEN_ENV, ""))
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
    code = worker.wait()
    sys.stderr.write(f"{EXIT_MARK}{code}{MARK_END}\n")
    sys.stderr.flush()
    return 0


def _end_with_session(pid: int, token: str) -> None:
    """End ``pid``'s group and what carries ``token`` once sshd's session process is gone."""
    session = os.getppid()

    def watch() -> None:
        while os.getppid() == session:
            time.sleep(processes.WATCH_PARENT_S)
        end(pid, token)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def tool(args: list[str]) -> int:
    timeout_s, rest = float(args[0]), args[1:]
    split = rest.index("--")
    env = dict(os.environ)
    env.update(pair.split("=", 1) for pair in rest[:split])
    token = uuid.uuid4().hex
    env[processes.TOKEN_ENV] = token
    status: dict = {"returncode": None, "timed_out": False}
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(rest[split + 1:], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, start_new_session=True)
        except OSError as exc:
            status["error"] = f"cannot start {rest[split + 1]}: {exc.strerror or exc}"
        else:
            _end_with_session(proc.pid, token)
            try:
                status["returncode"] = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                status["timed_out"] = True
                end(proc.pid, token)
                status["returncode"] = proc.wait()
            end(proc.pid, token)  # what it left running in its group
        out.seek(0)
        shutil.copyfileobj(out, sys.stdout.buffer)
    sys.stdout.flush()
    sys.stderr.write(f"{TOOL_MARK}{json.dumps(status)}{MARK_END}\n")
    sys.stderr.flush()
    return 0


def beside(args: list[str]) -> int:
    token = uuid.uuid4().hex
    env = {**os.environ, processes.TOKEN_ENV: token}
    proc = subprocess.Popen([sys.executable, "-m", *args], stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    _end_with_session(proc.pid, token)
    code = proc.wait()
    end(proc.pid, token)  # what it left running in its group
    return code


def end(pgid: int, token: str) -> None:
    """Kill the worker's group, its tree, and what it orphaned (found by its token)."""
    processes.kill_all(processes.descendants(pgid))
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if token:
        processes.kill_all(processes.tagged(token))


def prepare(workspace: str, run_dir: str) -> int:
    keep = {name for name in sys.stdin.buffer.read().decode("utf-8", "surrogateescape").split("\0") if name}
    for folder, dirs, files in os.walk(workspace):
        rel_folder = os.path.relpath(folder, workspace)
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            rel = os.path.normpath(os.path.join(rel_folder, name))
            if rel not in keep:
                os.unlink(os.path.join(folder, name))
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir, exist_ok=True)
    return 0


def main(argv: list[str]) -> int:
    verb, rest = argv[0], argv[1:]
    if verb == "launch":
        return launch(rest)
    if verb == "kill":
        end(int(rest[0]), rest[1] if len(rest) > 1 else "")
        return 0
    if verb == "signal":
        try:
            os.kill(int(rest[1]), processes.signal_number(rest[0]))
        except (ProcessLookupError, PermissionError, ValueError) as exc:
            print(f"ktui remote agent: signal {' '.join(rest)}: {exc}", file=sys.stderr)
            return 1
        return 0
    if verb == "prepare":
        return prepare(rest[0], rest[1])
    if verb == "tool":
        return tool(rest)
    if verb == "beside":
        return beside(rest)
    print(f"ktui remote agent: unknown verb {verb!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
