"""One owner of a workspace's GPUs: callers submit over its socket (a scripted runner runs the jobs)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from conftest import REPO, make_workspace
from test_queue import OPTIONS, Heard
from waits import SAFETY_S, gone, until

from ktui.dispatch.owner import OwnerGone, OwnerLink, OwnerServer, Ownership
from ktui.dispatch.placement import Placement
from ktui.dispatch.queue import RunQueue
from ktui.dispatch.scripted import Script, ScriptedRunner, Step
from ktui.dispatch.session import Session
from ktui.protocol.events import PASSED, RunFinished, RunStarted
from ktui.workspace.kernels import state_dir


@pytest.fixture
def ws(tmp_path):
    return make_workspace(tmp_path / "ws", ["add_triton", "softmax_triton"])


@pytest.fixture
def owner(ws):
    """This process owns ``ws``: a queue on a scripted runner, served on the workspace's socket."""
    runner = ScriptedRunner(lambda job: Script((Step("correctness", 0.1),)))
    queue = RunQueue(Session(ws, runner=runner), OPTIONS, Heard(), warm_up=False)
    queue.start()
    server = OwnerServer.claim(state_dir(ws), queue)
    assert server is not None
    yield runner, queue
    server.stop_accepting()
    queue.close()
    server.close()


@pytest.mark.unit
def test_a_caller_gets_the_owners_events_and_its_warm_worker_on_every_call(ws, owner):
    runner, _ = owner
    for _ in range(2):
        link = OwnerLink.connect(state_dir(ws))
        assert link is not None
        events = list(link.run([ws / "kernels" / "add_triton.py"], OPTIONS))
        assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunFinished)
        assert events[-1].verdict == PASSED
    assert len(runner.played) == 2 and runner.played[0].worker == runner.played[1].worker


@pytest.mark.unit
def test_the_owners_listener_sees_runs_that_came_from_other_callers(ws, owner):
    _, queue = owner
    list(OwnerLink.connect(state_dir(ws)).run([ws / "kernels" / "add_triton.py"], OPTIONS))
    assert [e.kernel for e in queue.listener.items if isinstance(e, RunStarted)] == ["add_triton"]


@pytest.mark.unit
def test_two_concurrent_callers_never_run_on_one_gpu_at_once(ws, owner):
    runner, _ = owner
    verdicts = []

    def call(name):
        link = OwnerLink.connect(state_dir(ws))
        verdicts.extend(e.verdict for e in link.run([ws / "kernels" / f"{name}.py"], OPTIONS)
                        if isinstance(e, RunFinished))

    callers = [threading.Thread(target=call, args=(name,)) for name in ("add_triton", "softmax_triton")]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(SAFETY_S)
    assert verdicts == [PASSED, PASSED]
    first, second = sorted(runner.played, key=lambda p: p.started)
    assert first.ended <= second.started, "the two runs overlapped"


@pytest.mark.unit
def test_a_caller_asking_for_another_placement_is_told_so_in_one_line(ws, owner):
    link = OwnerLink.connect(state_dir(ws))
    with pytest.raises(RuntimeError, match="runs on this machine, not GPUs 1,2") as caught:
        list(link.run([ws / "kernels" / "add_triton.py"], OPTIONS, placement=Placement(gpus="1,2")))
    assert "\n" not in str(caught.value)


@pytest.mark.unit
def test_a_second_owner_is_refused_while_the_first_holds_the_lock_and_the_folder_is_owner_only(ws, owner):
    state = state_dir(ws)
    assert Ownership.take(state) is None
    assert stat.S_IMODE(os.stat(state / "owner").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(state / "owner" / "socket").st_mode) == 0o600


@pytest.mark.unit
def test_a_second_claim_is_refused_while_the_first_server_holds_the_workspace_and_succeeds_after_its_close(ws):
    state = state_dir(ws)
    queue = RunQueue(Session(ws, runner=ScriptedRunner()), OPTIONS, Heard(), warm_up=False)
    try:
        first = OwnerServer.claim(state, queue)
        assert first is not None and first.path.exists()
        assert OwnerServer.claim(state, queue) is None, "the first server holds the workspace"
        first.stop_accepting()
        assert not first.path.exists()
        assert OwnerServer.claim(state, queue) is None, "a server that stopped accepting still owns the workspace"
        first.close()
        first.close()  # again: nothing
        second = OwnerServer.claim(state, queue)
        assert second is not None and second.path.exists(), "the first server's close gave the workspace back"
        second.close()
    finally:
        queue.close()


@pytest.mark.unit
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("sent", [b"", b'{"paths": ["kernels/nowhere.py"]}\n'])
def test_a_caller_that_hangs_up_before_its_answer_leaves_the_owner_serving(ws, sent):
    import socket

    queue = RunQueue(Session(ws, runner=ScriptedRunner()), OPTIONS, Heard(), warm_up=False)
    queue.start()
    server = OwnerServer.claim(state_dir(ws), queue)
    try:
        for _ in range(3):
            with socket.socket(socket.AF_UNIX) as conn:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")  # hang up hard
                conn.connect(str(server.path))
                conn.sendall(sent)
        time.sleep(0.3)  # the owner's threads answer into closed sockets
        assert OwnerLink.connect(state_dir(ws)) is not None, "the owner still accepts callers"
    finally:
        server.close()
        queue.close()


OWNER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from ktui.protocol.job import Options
    from ktui.dispatch.owner import OwnerServer
    from ktui.dispatch.queue import RunQueue
    from ktui.dispatch.scripted import HANG, Script, ScriptedRunner, Step
    from ktui.dispatch.session import Session
    from ktui.workspace.kernels import state_dir
    ws = Path(sys.argv[1])
    queue = RunQueue(Session(ws, runner=ScriptedRunner(lambda job: Script((Step("correctness", HANG),)))),
                     Options(), lambda item: None, warm_up=False)
    queue.start()
    assert OwnerServer.claim(state_dir(ws), queue) is not None
    print("owning", flush=True)
    time.sleep(600)
""")


@pytest.mark.worker
def test_an_owner_killed_mid_run_gives_its_caller_a_clear_error_and_a_later_command_becomes_owner(ws):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(ws)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "owning"
        link = OwnerLink.connect(state_dir(ws))
        events = iter(link.run([ws / "kernels" / "add_triton.py"], OPTIONS))
        assert isinstance(next(events), RunStarted)  # the run is in flight in the owner
        proc.send_signal(signal.SIGKILL)
        with pytest.raises(OwnerGone, match=f"pid {proc.pid}.* stopped before its runs finished"):
            list(events)
    finally:
        proc.kill()
        proc.wait()
    state = state_dir(ws)
    assert OwnerLink.connect(state) is None, "the dead owner's socket is found stale"
    runner = ScriptedRunner()
    queue = RunQueue(Session(ws, runner=runner), OPTIONS, Heard(), warm_up=False)
    queue.start()
    server = OwnerServer.claim(state, queue)  # replaces the stale socket
    assert server is not None, "its lock died with it"
    try:
        time.sleep(0.05)
        events = list(OwnerLink.connect(state).run([ws / "kernels" / "add_triton.py"], OPTIONS))
        assert events[-1].verdict == PASSED
    finally:
        server.stop_accepting()
        queue.close()
        server.close()


@pytest.mark.unit
def test_a_profile_s_turn_on_the_gpu_waits_for_the_run_in_flight_and_holds_off_the_next(ws, owner):
    from ktui.dispatch.owner import gpu_turn

    runner, _ = owner
    state = state_dir(ws)

    def call():
        list(OwnerLink.connect(state).run([ws / "kernels" / "add_triton.py"], OPTIONS))

    first = threading.Thread(target=call)
    first.start()
    until(lambda: runner.played, every_s=0.005)
    with gpu_turn(state, "ktui profile add_triton"):
        held = time.monotonic()
        second = threading.Thread(target=call)
        second.start()
        time.sleep(0.3)  # a while with the turn held: nothing may run in it, at any pace
        released = time.monotonic()
    first.join(SAFETY_S)
    second.join(SAFETY_S)
    assert len(runner.played) == 2
    assert runner.played[0].ended <= held, "the turn came once the run in flight had ended"
    assert runner.played[1].started >= released, "no run while the turn held the GPU"


@pytest.mark.unit
def test_with_no_owner_a_turn_is_taken_at_once(ws):
    from ktui.dispatch.owner import gpu_turn

    with gpu_turn(state_dir(ws), "ktui audit add"):
        pass


@pytest.mark.unit
def test_a_follower_hears_a_kernel_go_busy_when_queued_and_idle_when_its_run_ends_and_is_dropped_on_hangup(ws, owner):
    _, queue = owner
    kernel = ws / "kernels" / "add_triton.py"
    follow = OwnerLink.connect(state_dir(ws)).follow(kernel)
    assert follow.next(SAFETY_S) == {"type": "owner_following", "busy": False, "save_grace_s": None}
    other = threading.Thread(target=lambda: list(OwnerLink.connect(state_dir(ws)).run([kernel], OPTIONS)))
    other.start()
    assert follow.next(SAFETY_S)["busy"] is True
    assert follow.next(SAFETY_S)["busy"] is False  # the run ended: its verdict is in the history now
    other.join(SAFETY_S)
    assert follow.next(0.3) is None, "nothing more while nothing changes"
    follow.close()
    assert not gone(lambda: queue._followers), "a caller that hung up is no longer told anything"


@pytest.mark.unit
def test_a_request_without_the_workspaces_token_is_refused_in_one_line(ws, owner):
    import json
    import socket

    with socket.socket(socket.AF_UNIX) as conn:
        conn.connect(str(state_dir(ws) / "owner" / "socket"))
        conn.sendall(b'{"type": "run_request", "token": "guessed", "paths": []}\n')
        answer = json.loads(conn.makefile().readline())
    assert answer == {"type": "owner_error",
                      "message": "refused: the request does not carry this workspace's token (.ktui/owner/token)"}
    assert stat.S_IMODE(os.stat(state_dir(ws) / "owner" / "token").st_mode) == 0o600
