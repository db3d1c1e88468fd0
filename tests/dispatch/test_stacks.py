"""A timed-out kernel's place comes from the worker's faulthandler dump, read until it is complete:
a pause in the middle of the dump (a loaded machine) is not its end."""

from __future__ import annotations

import os
import textwrap
import time

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs
from waits import until

from ktui.dispatch import stacks
from ktui.dispatch.transport import Command, LocalProcess
from ktui.dispatch.worker_protocol import WorkerProcess

# Spins like a hung kernel, in ``ws/spin.py`` (the workspace). Its dump goes through a relay that
# stops for PAUSE seconds after the first lines, as a dump read on a loaded machine does.
SLOW_DUMP = '''
import faulthandler, os, sys, threading, time
from ktui.protocol.processes import STACK_SIGNAL

sys.path.insert(0, "ws")
from spin import spin

PAUSE = float(sys.argv[1])
read, write = os.pipe()
sink = os.fdopen(write, "w")
faulthandler.register(STACK_SIGNAL, file=sink, all_threads=True)


def relay():
    for number, line in enumerate(os.fdopen(read), 1):
        sys.stderr.write(line)
        sys.stderr.flush()
        if number == 3:
            time.sleep(PAUSE)


threading.Thread(target=relay, daemon=True).start()
spin()
'''


@pytest.fixture
def spinning(tmp_path, monkeypatch):
    (tmp_path / "slow_dump.py").write_text(textwrap.dedent(SLOW_DUMP))
    (tmp_path / "ws").mkdir()
    # it says it spins (its handler registered, its thread relaying) once it is inside spin()
    (tmp_path / "ws" / "spin.py").write_text('def spin():\n    open("spinning", "w").close()\n    while True:\n        pass\n')
    monkeypatch.chdir(tmp_path)  # ``-m slow_dump`` finds it in the working directory
    started = []

    def start(pause_s: float) -> WorkerProcess:
        worker = WorkerProcess(LocalProcess(Command("slow_dump", (str(pause_s),))))
        started.append(worker)
        assert until(lambda: (tmp_path / "spinning").exists() or not worker.alive()), "it never began to spin"
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.mark.worker
def test_a_dump_that_pauses_midway_is_read_to_its_end_and_names_the_spinning_function(spinning, tmp_path):
    dump = stacks.ask_for_stack(spinning(0.5))
    assert dump.complete and stacks.OUTERMOST in dump.lines[-1]
    frame = stacks.user_frame(dump.lines, str(tmp_path / "ws"))
    assert frame is not None and frame.function == "spin" and frame.file.endswith("spin.py"), dump.lines
    message, error = stacks.timeout_place("run exceeded its 4 s limit", dump, str(tmp_path / "ws"))
    assert message.endswith(f"it was at spin.py:{frame.line} in spin") and frame.line in (3, 4)
    assert error.location.line == frame.line and stacks.OUTERMOST in error.traceback


@pytest.mark.worker
def test_a_dump_that_never_completes_is_told_as_such_after_the_bounded_wait(spinning, tmp_path):
    worker = spinning(3600.0)  # the relay stops for an hour after three lines: ended at all, the wait was bounded
    started = time.monotonic()
    dump = stacks.ask_for_stack(worker, wait_s=5.0)
    assert time.monotonic() - started >= 5.0  # and it waited its bound
    assert not dump.complete and len(dump.lines) <= 3
    message, error = stacks.timeout_place("run exceeded its 4 s limit", dump, str(tmp_path / "ws"))
    assert message.endswith("where it was is unknown: its Python stack had not arrived in full after 5 s")
    assert error.location is None and error.traceback == "\n".join(dump.lines)


@pytest.mark.worker
def test_a_kernel_hanging_inside_its_triton_loop_is_placed_on_its_line_every_time(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["hang_in_jit"])
    source = (ws / "kernels" / "hang_in_jit.py").read_text()
    names = [f"hang_{i}" for i in range(4)]
    for name in names:  # four timeouts, each in a worker of its own
        (ws / "kernels" / f"{name}.py").write_text(source)
    (ws / "kernels" / "hang_in_jit.py").unlink()
    # Each dump is waited for until it is whole (the event), however starved the machine is.
    proc = ktui("run", "--no-audit", "kernels", "--json", "--cpu", "--no-bench", "--seed", "0", "--timeout", "run=3", cwd=ws,
                env={"KTUI_STACK_WAIT_S": "60"})
    kernels = by_kernel(parse_events(proc.stdout))
    assert sorted(kernels) == names, proc.stderr
    for name in names:
        run = rungs(kernels[name])["run"]
        assert run["status"] == "timed_out" and finished(kernels[name])["verdict"] == "timed_out"
        place = run["error"]["location"] if run["error"] else None
        assert place is not None, f"{name}: {run['message']}"
        assert place["file"].endswith(f"kernels/{name}.py") and place["line"] in (17, 18, 19, 20)  # the while loop
        assert f"it was at kernels/{name}.py:{place['line']} in add_kernel" in run["message"]


@pytest.mark.unit
def test_a_frame_of_code_made_at_run_time_is_never_taken_for_the_users_line(tmp_path):
    """Triton's interpreter runs code it made (``File "<string>"``) inside the kernel's loop; relative
    to the worker's folder that name looked like a workspace file and was named as where it hung."""
    from ktui.dispatch.stacks import user_frame

    kernel = tmp_path / "kernels" / "hang.py"
    dump = ['Thread 0x00007f (most recent call first):',
            '  File "<string>", line 3 in store',
            f'  File "{kernel}", line 19 in add_kernel',
            '  File "<frozen runpy>", line 88 in _run_code']
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the worker runs in the workspace
    try:
        frame = user_frame(dump, str(tmp_path))
    finally:
        os.chdir(cwd)
    assert frame is not None and frame.file == str(kernel) and frame.line == 19
