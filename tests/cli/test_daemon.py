"""The workspace daemon with real processes (CPU tier): any ``ktui run`` starts it or submits to it,
each caller gets its own runs alone, it survives nothing it should not and leaves nothing behind.

The rest of the suite runs one-shot (``KTUI_NO_DAEMON=1``, tests/conftest.py); these commands ask
for the daemon, and every test stops the one it started.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, child_env, make_workspace, parse_events
from held_audit import KERNEL, REFERENCE, audit_records, held_audit
from waits import until

from ktui.history.store import Store
from ktui.protocol.schema import validate
from ktui.workspace.kernels import state_dir

pytestmark = pytest.mark.worker

RUN = ["run", "--no-bench", "--no-audit", "--cpu", "--no-fresh-shapes"]


def daemon_env(**extra: str) -> dict:
    return child_env({"KTUI_NO_DAEMON": "0", **extra})


def ktui_proc(*args: str, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ktui", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env or daemon_env())


def ktui_run(*args: str, cwd: Path, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """A command read to the end, as a script reads it: returns only if nothing it started holds its pipes."""
    return subprocess.run([sys.executable, "-m", "ktui", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env or daemon_env())


def status(ws: Path) -> dict | None:
    proc = ktui_run("serve", "--status", "--json", cwd=ws, timeout=60)
    answer = json.loads(proc.stdout)
    return answer if answer.get("pid") else None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def stop_daemon(ws: Path) -> None:
    """Stop the workspace's daemon (killed if it does not stop) and wait until it is gone."""
    found = status(ws)
    if found is None:
        return
    ktui_run("serve", "--stop", cwd=ws, timeout=120)
    try:
        wait_until(lambda: not alive(found["pid"]), 60, "the daemon to exit")
    finally:
        if alive(found["pid"]):
            os.kill(found["pid"], signal.SIGKILL)


def daemons_of(ws: Path) -> list[int]:
    """The daemon processes serving ``ws`` (by their command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--detached" in argv and str(ws).encode() in argv and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.fixture
def ws(tmp_path):
    root = make_workspace(tmp_path / "ws", ["add_triton"], fixtures=["wrong_values", "missing_reference", "hang"])
    yield root
    stop_daemon(root)


def test_two_callers_that_start_together_get_one_daemon_and_a_script_reading_their_output_never_waits_on_it(ws):
    callers = [ktui_proc(*RUN, "kernels/add_triton.py", cwd=ws) for _ in range(2)]
    outs = [proc.communicate(timeout=600) for proc in callers]  # read to the end: the daemon holds none of the pipes
    assert [proc.returncode for proc in callers] == [0, 0], [err for _, err in outs]
    found = status(ws)
    assert found is not None and found["daemon"], "the callers left the workspace's daemon running"
    assert daemons_of(ws) == [found["pid"]], "one daemon for the two callers"
    owner = ws / ".ktui" / "owner"
    assert oct(owner.stat().st_mode & 0o777) == "0o700"
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in owner.iterdir() if p.name in ("socket", "token", "lock")} \
        == {"socket": "0o600", "token": "0o600", "lock": "0o600"}
    again = ktui_run(*RUN, "kernels/add_triton.py", cwd=ws)
    assert again.returncode == 0 and status(ws)["pid"] == found["pid"], "the next call is served by the same daemon"


def test_three_callers_of_three_kernels_each_see_only_their_own_lines_json_and_exit_code(ws):
    ktui_run(*RUN, "kernels/add_triton.py", cwd=ws)  # the daemon is up: the three submit to it together
    asked = {"add_triton": 0, "wrong_values": 1, "missing_reference": 2}
    json_callers = {name: ktui_proc(*RUN, "--json", f"kernels/{name}.py", cwd=ws) for name in asked}
    line_callers = {name: ktui_proc(*RUN, f"kernels/{name}.py", cwd=ws) for name in asked}
    for name, proc in json_callers.items():
        out, err = proc.communicate(timeout=600)
        events = parse_events(out)
        assert {e["kernel"] for e in events if e["type"] == "run_started"} == {name}, out
        ours = {e["run_id"] for e in events if e["type"] == "run_started"}
        assert {e["run_id"] for e in events} == ours, "an event of another caller's run"
        assert proc.returncode == asked[name], (name, err)
    for name, proc in line_callers.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == asked[name], (name, err)
        others = [other for other in asked if other != name]
        assert f"{name} v" in out and not any(f"{other} v" in out for other in others), out


def test_a_daemon_killed_mid_run_is_said_and_recorded_and_the_next_call_starts_a_fresh_one(ws):
    ktui_run(*RUN, "kernels/add_triton.py", cwd=ws)
    killed = status(ws)["pid"]
    caller = ktui_proc(*RUN, "--json", "kernels/hang.py", cwd=ws)
    started = caller.stdout.readline()
    assert json.loads(started)["type"] == "run_started", started
    os.kill(killed, signal.SIGKILL)
    _, err = caller.communicate(timeout=120)
    assert caller.returncode == 2 and f"(pid {killed}) stopped before its runs finished" in err, err
    assert len(err.strip().splitlines()) == 1, err
    again = ktui_run(*RUN, "kernels/add_triton.py", cwd=ws)
    assert again.returncode == 0, again.stderr
    fresh = status(ws)
    assert fresh is not None and fresh["pid"] != killed
    store = Store.of(state_dir(ws))
    try:
        [hang] = store.runs("hang")
    finally:
        store.close()
    assert hang.verdict == "interrupted" and f"pid {killed}" in hang.message, hang


def test_a_daemon_of_another_making_is_replaced_when_idle_and_left_alone_while_busy(ws):
    ours, theirs = daemon_env(CUDA_VISIBLE_DEVICES="7"), daemon_env(CUDA_VISIBLE_DEVICES="6")
    assert ktui_run(*RUN, "kernels/add_triton.py", cwd=ws, env=theirs).returncode == 0
    old = status(ws)["pid"]
    replaced = ktui_run(*RUN, "kernels/add_triton.py", cwd=ws, env=ours)
    assert replaced.returncode == 0, replaced.stderr
    assert replaced.stderr.splitlines()[0] == (f"ktui: replaced the workspace's daemon (pid {old}): it was started by "
                                               "other GPU-visibility variables (CUDA_VISIBLE_DEVICES=6; this is "
                                               "CUDA_VISIBLE_DEVICES=7)"), replaced.stderr
    new = status(ws)["pid"]
    assert new != old and not alive(old)
    busy = ktui_proc(*RUN, "--json", "kernels/hang.py", cwd=ws, env=ours)  # the daemon runs it, hanging
    try:
        assert json.loads(busy.stdout.readline())["type"] == "run_started"
        alone = ktui_run(*RUN, "kernels/add_triton.py", cwd=ws, env=theirs)
        assert alone.returncode == 0, alone.stderr
        assert alone.stderr.splitlines()[0] == (f"ktui: the workspace's daemon (pid {new}) was started by other "
                                                "GPU-visibility variables (CUDA_VISIBLE_DEVICES=7; this is "
                                                "CUDA_VISIBLE_DEVICES=6), and it is busy: running on my own"), alone.stderr
        assert "add_triton v1 passed" in alone.stdout
        assert status(ws)["pid"] == new and status(ws)["runs"] == 1, "the busy daemon and its run were left alone"
    finally:
        busy.send_signal(signal.SIGINT)  # the caller cancels its run in the daemon
        out, _ = busy.communicate(timeout=120)
    assert busy.returncode == 128 + signal.SIGINT
    assert [e["verdict"] for e in parse_events(out) if e["type"] == "run_finished"] == ["cancelled"]


def test_an_idle_daemon_ends_its_worker_then_itself_and_leaves_nothing_that_blocks_the_next(ws):
    env = daemon_env(KTUI_WORKER_IDLE_S="3", KTUI_DAEMON_IDLE_S="8")
    assert ktui_run(*RUN, "kernels/add_triton.py", cwd=ws, env=env).returncode == 0
    found = status(ws)
    assert found["worker"] and found["idle_limits_s"] == {"worker": 3.0, "daemon": 8.0}
    log = Path(found["log"])
    wait_until(lambda: "its worker(s) ended" in log.read_text(), 120, "the idle worker to end")
    assert status(ws)["worker"] is False and alive(found["pid"])
    wait_until(lambda: not alive(found["pid"]), 120, "the idle daemon to end")
    assert "the daemon ends" in log.read_text()
    assert not (ws / ".ktui" / "owner" / "socket").exists()
    assert ktui_run(*RUN, "kernels/add_triton.py", cwd=ws, env=env).returncode == 0, "a new daemon starts"


def test_a_second_watch_is_a_second_view_of_one_watch_and_a_save_runs_once(ws):
    argv = ["watch", "--headless", "--lazy", "--no-audit", "--cpu", "--no-bench", "--no-fresh-shapes",
            "--debounce-ms", "50"]
    views = [ktui_proc(*argv, cwd=ws)]
    try:
        wait_until(lambda: status(ws) is not None and status(ws)["views"] == 1, 300, "the first view")
        views.append(ktui_proc(*argv, cwd=ws))
        wait_until(lambda: status(ws)["views"] == 2, 300, "the second view")
        kernel = ws / "kernels" / "add_triton.py"
        kernel.write_text(kernel.read_text() + "\n# saved once\n")
        finished, lines = [], []
        for view in views:
            for line in view.stdout:
                event = json.loads(line)
                lines.append(event)
                if event["type"] == "run_finished":
                    finished.append(event["run_id"])
                    break
    finally:
        for view in views:
            view.send_signal(signal.SIGTERM)
        for view in views:
            view.communicate(timeout=60)
    assert len(finished) == 2 and finished[0] == finished[1], "both views saw the one run"
    schema = json.loads((REPO / "docs" / "events.schema.json").read_text())
    assert [p for line in lines for p in validate(line, schema)] == [], "every line a view printed fits the schema"
    assert {"runner_ready", "watcher_state", "queue", "saved"} <= {line["type"] for line in lines}
    store = Store.of(state_dir(ws))
    try:
        assert len(store.runs("add_triton")) == 1, "the save ran once, not once per watch"
    finally:
        store.close()


def test_without_the_daemon_a_watch_is_refused_while_a_command_of_its_own_owns_the_workspace(ws):
    owner = ktui_proc(*RUN, "--json", "--no-daemon", "kernels/hang.py", cwd=ws)
    try:
        assert json.loads(owner.stdout.readline())["type"] == "run_started"
        watch = ktui_run("watch", "--headless", "--no-daemon", "--cpu", cwd=ws, timeout=120)
    finally:
        owner.send_signal(signal.SIGTERM)
        owner.communicate(timeout=120)
    assert watch.returncode == 2, watch.stdout
    assert watch.stderr == (f"ktui: the workspace is owned by pid {owner.pid} (a ktui command run with --no-daemon): a "
                            "watch of its own would run every save a second time; wait for it to end, or run the "
                            "daemon (ktui serve)\n")


def test_a_first_audit_goes_on_in_the_daemon_after_its_caller_exited_and_reaches_a_view_and_the_next_run(ws):
    go = held_audit(ws)
    argv = ["run", "--no-bench", "--cpu", "--no-fresh-shapes", KERNEL]
    first = ktui_run(*argv, cwd=ws)  # its audit is held: the answer arriving at all shows it was not waited for
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    assert "· trust pending: reference not audited yet" in first.stdout.strip().splitlines()[-1], first.stdout[-2000:]
    daemon = status(ws)["pid"]
    assert first.stderr.splitlines()[-1] == (
        f"ktui: {REFERENCE}: not audited yet: the workspace's daemon (pid {daemon}) audits it in the background; "
        "the next run of its kernels says what it finds (--strict waits for it)"), first.stderr
    assert not audit_records(ws)

    view = ktui_proc("watch", "--headless", "--lazy", "--no-audit", "--cpu", "--no-bench", "--no-fresh-shapes", cwd=ws)
    seen: list[dict] = []
    threading.Thread(target=lambda: seen.extend(json.loads(line) for line in view.stdout), daemon=True).start()
    try:
        assert until(lambda: status(ws)["views"] == 1), "the dashboard's view attached"
        go.write_text("go")  # the daemon's audit goes on, its caller long gone
        told = until(lambda: [line for line in seen if line["type"] == "audit_finished"])
    finally:
        view.send_signal(signal.SIGTERM)
        view.communicate(timeout=60)
    assert [(t["reference"], t["verdict"], t["kernels"]) for t in told] == [(str(ws / REFERENCE), "strong",
                                                                           ["heldaudit_triton"])], told
    assert len(audit_records(ws)) == 1 and status(ws)["pid"] == daemon

    again = ktui_run(*argv, cwd=ws)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip().splitlines()[-1].startswith("heldaudit_triton v1 passed · 5/5 correct · trusted ·")
    assert "not audited" not in again.stderr, again.stderr
    history = ktui_run("history", KERNEL, "--json", cwd=ws)
    assert [json.loads(line)["summary"]["trusted"] for line in history.stdout.splitlines()] == [True, True]
