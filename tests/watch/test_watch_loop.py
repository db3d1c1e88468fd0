"""The watch loop end to end with real files and real worker processes (no UI)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, make_workspace
from headless import Headless
from leftovers import tagged
from waits import gone

from ktui.protocol.events import RunFinished, RungStarted, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.notices import QueueChanged, Saved
from ktui.watch.loop import WatchLoop, WatchSettings
from ktui.workspace.folder import Workspace
from ktui.workspace.kernels import content_hash

ADD = (REPO / "kernels" / "add_triton.py").read_text()
HANG = (FIXTURES / "kernels" / "hang.py").read_text()


def save_atomically(path: Path, text: str) -> None:
    """How agents save: write a temp file next to it, then os.replace."""
    tmp = path.with_name(path.name + f".{uuid.uuid4().hex[:6]}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class Collector:
    def __init__(self):
        self.items: list = []
        self.cond = threading.Condition()

    def __call__(self, item) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def wait_for(self, predicate, timeout: float = 120.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for item in self.items:
                    if predicate(item):
                        return item
                left = deadline - time.monotonic()
                if left <= 0:
                    kinds = [type(i).__name__ for i in self.items[-20:]]
                    raise AssertionError(f"timed out; last items: {kinds}")
                self.cond.wait(left)

    def of(self, cls):
        with self.cond:
            return [i for i in self.items if isinstance(i, cls)]


@pytest.mark.worker
def test_a_save_during_a_run_cancels_it_and_the_newest_content_runs(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    kernel = ws / "kernels" / "add_edit.py"
    kernel.write_text(HANG)
    got = Collector()
    loop = WatchLoop(Workspace.at(ws), Options(seed=0, timeouts={"compile": 120}), got,
                     WatchSettings(debounce_s=0.05, audit=False))
    loop.start()
    try:
        stale = got.wait_for(lambda e: isinstance(e, RungStarted) and e.rung == "compile")
        save_atomically(kernel, ADD)
        cancelled = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == stale.run_id)
        assert cancelled.verdict == "cancelled"
        fresh = got.wait_for(lambda e: isinstance(e, RunStarted) and e.run_id != stale.run_id)
        assert fresh.content_hash == content_hash(ADD.encode())
        done = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == fresh.run_id)
        assert done.verdict == "passed"
        # Never two runs at once: every run_started follows the previous run's run_finished.
        open_runs = 0
        for item in got.items:
            if isinstance(item, RunStarted):
                open_runs += 1
                assert open_runs == 1
            elif isinstance(item, RunFinished):
                open_runs -= 1
        assert any(q.cancelling for q in got.of(QueueChanged))
    finally:
        loop.close()
    latest = json.loads((ws / ".ktui" / "latest" / "add_edit.json").read_text())
    assert latest["content_hash"] == content_hash(ADD.encode()) and latest["verdict"] == "passed"


@pytest.mark.worker
def test_a_reference_save_reruns_every_kernel_that_uses_it(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton", "softmax_triton"])
    (ws / "kernels" / "add_copy.py").write_text(ADD)
    got = Collector()
    loop = WatchLoop(Workspace.at(ws), Options(seed=0), got, WatchSettings(debounce_s=0.05, catch_up=False, audit=False))
    loop.start()
    try:
        ref = ws / "references" / "add.py"
        save_atomically(ref, ref.read_text() + "\n# a comment changes the reference's hash\n")
        saved = got.wait_for(lambda e: isinstance(e, Saved))
        assert saved.dependency and sorted(saved.kernels) == ["add_copy", "add_triton"]
        for name in ("add_copy", "add_triton"):
            got.wait_for(lambda e, n=name: isinstance(e, RunStarted) and e.kernel == n)
        got.wait_for(lambda e: isinstance(e, QueueChanged) and e.running is None and not e.queued
                     and len(got.of(RunFinished)) == 2)
        assert not [e for e in got.of(RunStarted) if e.kernel == "softmax_triton"]
    finally:
        loop.close()


@pytest.mark.worker
def test_a_reference_save_during_a_run_cancels_it_and_the_new_run_records_the_new_reference(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    kernel = ws / "kernels" / "add_edit.py"
    kernel.write_text(HANG)
    got = Collector()
    loop = WatchLoop(Workspace.at(ws), Options(seed=0, timeouts={"compile": 120}), got,
                     WatchSettings(debounce_s=0.05, audit=False))
    loop.start()
    try:
        stale = got.wait_for(lambda e: isinstance(e, RungStarted) and e.rung == "compile")
        old = got.wait_for(lambda e: isinstance(e, RunStarted) and e.run_id == stale.run_id)
        ref = ws / "references" / "add.py"
        save_atomically(ref, ref.read_text() + "\n# a comment changes the reference's hash\n")
        cancelled = got.wait_for(lambda e: isinstance(e, RunFinished) and e.run_id == stale.run_id)
        assert cancelled.verdict == "cancelled"
        fresh = got.wait_for(lambda e: isinstance(e, RunStarted) and e.run_id != stale.run_id)
        assert fresh.reference_hash == content_hash(ref.read_bytes()) != old.reference_hash
    finally:
        loop.close()


@pytest.mark.worker
def test_a_kernel_that_rewrites_its_reference_in_every_run_ends_suspicious_never_passed(tmp_path, monkeypatch):
    # Its first run changes the reference (cancelled, or judged by the recorded one); the run that
    # follows is judged by what it wrote, and writing it again there gives the kernel away.
    monkeypatch.setenv("KTUI_NO_CONFINE", "1")  # the snapshot is under test here, not a sandbox
    ws = make_workspace(tmp_path / "ws", hacks=["rewrites_reference"])
    got = Collector()
    loop = WatchLoop(Workspace.at(ws), Options(seed=0, benchmark=False), got, WatchSettings(debounce_s=0.05, audit=False))
    loop.start()
    try:
        done = got.wait_for(lambda e: isinstance(e, RunFinished) and e.verdict not in ("cancelled", "failed"), timeout=240)
        assert done.verdict == "suspicious" and "written again during this second run" in done.message
        assert [f.verdict for f in got.of(RunFinished)][:-1] in (["cancelled"], ["failed"])
    finally:
        loop.close()




@pytest.mark.worker
def test_headless_prints_json_lines_writes_latest_and_leaves_no_process(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    watch = Headless(ws, "--no-audit")
    until = watch.until
    try:
        until(lambda e: e["type"] == "watcher_state" and e["mode"] == "inotify")
        first = until(lambda e: e["type"] == "run_finished")  # the catch-up run: no result stored yet
        assert first["verdict"] == "passed"
        edited = ADD.replace("block = 1024", "block = 512")
        save_atomically(ws / "kernels" / "add_triton.py", edited)
        save = until(lambda e: e["type"] == "saved")
        assert save["kernels"] == ["add_triton"] and save["content_hash"] == content_hash(edited.encode())
        started = until(lambda e: e["type"] == "run_started")
        assert started["version"] == 2 and started["content_hash"] == save["content_hash"]
        end = until(lambda e: e["type"] == "run_finished")
        assert end["verdict"] == "passed"
        latest = json.loads((ws / ".ktui" / "latest" / "add_triton.json").read_text())
        assert latest["version"] == 2 and latest["content_hash"] == save["content_hash"]
    finally:
        code = watch.stop(timeout=30)
    assert code == 0, watch.proc.stderr.read()
    assert gone(lambda: tagged("KTUI_TEST_TAG", watch.tag)) == []


@pytest.mark.worker
@pytest.mark.parametrize("flags", [(), ("--poll",)], ids=["inotify", "polling"])
def test_headless_runs_the_saves_of_a_kernels_folder_removed_and_made_again(tmp_path, flags):
    import shutil

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    kernels = ws / "kernels"
    watch = Headless(ws, "--no-audit", "--no-bench", *flags)
    until = watch.until
    try:
        assert until(lambda e: e["type"] == "run_finished")["verdict"] == "passed"  # the catch-up run
        shutil.rmtree(kernels)
        seen: set[str] = set()

        def gone(e: dict) -> bool:  # its kernel gone and the folder no longer watched, in either order
            if e["type"] == "saved" and e["content_hash"] is None and e["path"] == str(kernels / "add_triton.py"):
                seen.add("kernel gone")
            if e["type"] == "watcher_state" and str(kernels) not in e["folders"]:
                seen.add("folder unwatched")
            return len(seen) == 2

        until(gone)
        kernels.mkdir()
        until(lambda e: e["type"] == "watcher_state" and str(kernels) in e["folders"])
        edited = ADD.replace("block = 1024", "block = 512")
        save_atomically(kernels / "add_triton.py", edited)
        started = until(lambda e: e["type"] == "run_started")
        assert started["content_hash"] == content_hash(edited.encode()) and started["version"] == 2
        assert until(lambda e: e["type"] == "run_finished")["verdict"] == "passed"
    finally:
        code = watch.stop(timeout=30)
    assert code == 0, "".join(watch.stderr)


@pytest.mark.worker
def test_headless_on_a_missing_kernels_folder_says_what_to_create_and_stops_on_sigterm(tmp_path):
    ws = tmp_path / "ws"
    (ws / "references").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--no-audit"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "workspace_note" and "no kernels/ folder" in first["message"]
        assert proc.poll() is None
    finally:
        for _ in range(5):  # signals at any moment, repeated: never a hang
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.05)
        assert proc.wait(timeout=30) == 0


@pytest.mark.worker
def test_headless_stops_when_its_reader_goes_away(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--no-audit", "--lazy"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert json.loads(proc.stdout.readline())["type"] == "watcher_state"
        proc.stdout.close()  # the agent reading the stream quits
        save_atomically(ws / "kernels" / "add_triton.py", ADD + "\n# the next line written finds no reader\n")
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.worker
@pytest.mark.parametrize("headless", [["--headless"], []], ids=["headless", "dashboard"])
@pytest.mark.parametrize("where", ["outside a workspace", "in a workspace"])
def test_watch_on_a_path_that_does_not_exist_is_a_clear_error(tmp_path, where, headless):
    from conftest import ktui

    ws = make_workspace(tmp_path / "ws") if where == "in a workspace" else tmp_path
    proc = ktui("watch", "nope/", *headless, cwd=ws, timeout=60)  # a typo: never an empty dashboard
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ktui: nope: no such folder (ktui watch takes a workspace") and "ktui init" in proc.stderr


@pytest.mark.worker
def test_watch_of_the_current_folder_waits_for_its_kernels_folder(tmp_path):
    (tmp_path / "references").mkdir()  # a workspace being made: kernels/ comes later
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", "--headless", "--no-audit"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = json.loads(proc.stdout.readline())
        assert first["type"] == "workspace_note" and "no kernels/ folder in ." in first["message"]
        assert json.loads(proc.stdout.readline())["type"] == "watcher_state" and proc.poll() is None  # still watching
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


@pytest.mark.unit
def test_a_cancelled_run_leaves_the_latest_file_with_the_last_real_verdict(tmp_path):
    from ktui.history.reports import ReportWriter, latest_path
    from ktui.protocol.events import RunFinished, RunStarted

    state = tmp_path / ".ktui"
    writer = ReportWriter(state)

    def run(run_id: str, version: int, verdict: str) -> None:
        run_dir = state / "runs" / "k" / str(version)
        run_dir.mkdir(parents=True, exist_ok=True)
        writer(RunStarted(run_id, kernel="k", path="k.py", version=version, content_hash=f"h{version}", reference="r.py",
                          reference_hash="r", tier="cpu", device="CPU", arch="sm_90a", run_dir=str(run_dir)))
        writer(RunFinished(run_id, verdict=verdict))

    run("a", 1, "passed")
    run("b", 2, "cancelled")
    latest = json.loads(latest_path(state, "k").read_text())
    assert (latest["version"], latest["verdict"]) == (1, "passed")
    assert json.loads((state / "runs" / "k" / "2" / "report.json").read_text())["verdict"] == "cancelled"
    run("c", 3, "failed")
    assert json.loads(latest_path(state, "k").read_text())["verdict"] == "failed"


@pytest.mark.worker
def test_sigterm_of_headless_cancels_the_run_saying_the_watcher_stopped(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "add_slow.py").write_text(HANG)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "watch", str(ws), "--headless", "--no-audit", "--timeout", "compile=300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in proc.stdout:
            if json.loads(line).get("rung") == "compile":
                break
        proc.send_signal(signal.SIGTERM)
        rest = [json.loads(line) for line in proc.stdout]
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    end = next(e for e in rest if e["type"] == "run_finished")
    assert end["verdict"] == "cancelled"
    assert end["message"] == "cancelled: stopped by SIGTERM: the watcher is stopping"


def _watch_rewriting_kernel(tmp_path, got: Collector) -> tuple[WatchLoop, Path]:
    ws = make_workspace(tmp_path / "ws", fixtures=["rewrites_itself"])
    loop = WatchLoop(Workspace.at(ws), Options(seed=0, benchmark=False), got, WatchSettings(debounce_s=0.05, audit=False))
    loop.start()
    return loop, ws / "kernels" / "rewrites_itself.py"


@pytest.mark.worker
def test_an_unconfined_kernel_that_keeps_saving_itself_is_stopped_after_a_few_reruns_saying_why(tmp_path, monkeypatch):
    from ktui.protocol.notices import RerunsStopped
    from ktui.protocol.processes import NO_CONFINE_ENV
    from ktui.watch.echoes import LIMIT

    monkeypatch.setenv(NO_CONFINE_ENV, "1")
    got = Collector()
    loop, kernel = _watch_rewriting_kernel(tmp_path, got)
    try:
        got.wait_for(lambda e: isinstance(e, RerunsStopped) or len(got.of(RunStarted)) > LIMIT + 2, timeout=300)
        assert got.of(RerunsStopped), f"{len(got.of(RunStarted))} runs, and it is still being re-run"
        (stopped,) = got.of(RerunsStopped)
        assert stopped.kernel == "rewrites_itself" and stopped.path == str(kernel)
        assert "kept rewriting kernels/rewrites_itself.py during its own runs" in stopped.message
        last = got.wait_for(lambda e: isinstance(e, RunFinished) and e.verdict != "cancelled")
        assert last.verdict == "passed"
        time.sleep(3.0)  # no save of the user's: nothing more runs
        starts = got.of(RunStarted)
        assert len(starts) == 1 + LIMIT and all(s.confined is False for s in starts)
        save_atomically(kernel, kernel.read_text() + "# the user's edit\n")  # it runs again (and echoes again)
        got.wait_for(lambda e: isinstance(e, RunStarted) and len(got.of(RunStarted)) > 1 + LIMIT)
    finally:
        loop.close()


@pytest.mark.worker
def test_a_confined_kernel_cannot_save_itself_so_it_runs_once(tmp_path):
    got = Collector()
    loop, kernel = _watch_rewriting_kernel(tmp_path, got)
    try:
        done = got.wait_for(lambda e: isinstance(e, RunFinished))
        assert done.verdict == "failed" and "PermissionError" in done.message + json.dumps(done.summary), done.summary
        time.sleep(2.0)
        assert len(got.of(RunStarted)) == 1 and got.of(RunStarted)[0].confined is True
        assert kernel.read_text() == (FIXTURES / "kernels" / "rewrites_itself.py").read_text()
    finally:
        loop.close()
