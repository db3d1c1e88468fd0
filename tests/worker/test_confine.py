"""User code is confined: it reads what building and running a kernel needs, writes only its run
folders, its temp folder and ktui's compiler caches, has no network and no reach out of its sandbox —
never the history, never its reference (Landlock, Linux ≥ 5.13; seccomp)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import REPO, by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.protocol.processes import NO_CONFINE_ENV, TMP_ENV
from ktui.protocol.statedir import compiler_caches
from ktui.worker.confine import IOCTL_DEV, REFER, TRUNCATE, landlock_abi, write_rights
from ktui.worker.confine.landlock import EXECUTE, READ_DIR, READ_FILE, SCOPES_ABI, handled_rights
from ktui.worker.confine.rules import has_gpu_driver


def _abi() -> int:
    try:
        return landlock_abi()
    except OSError:
        return 0


needs_landlock = pytest.mark.skipif(_abi() < 1, reason="this kernel has no Landlock")

PROBE = r"""
import json, os, socket, sys, tempfile
from pathlib import Path
from ktui.worker.confine import confine

allowed, denied, workspace, home = map(Path, sys.argv[1:5])
status = confine([allowed], [workspace])
report = {"status": status.to_json(), "tmp": tempfile.gettempdir(), "triton_cache": os.environ.get("TRITON_CACHE_DIR")}

def attempt(name, action):
    try:
        action()
        report[name] = "ok"
    except OSError as exc:
        report[name] = type(exc).__name__

attempt("allowed", lambda: (allowed / "new.txt").write_text("x"))
attempt("denied", lambda: (denied / "new.txt").write_text("x"))
attempt("truncate", lambda: open(denied / "history.db", "w").close())
attempt("read", lambda: (denied / "history.db").read_text())
attempt("kernel", lambda: (workspace / "kernels" / "k.py").read_text())
attempt("listing", lambda: os.listdir(workspace))
attempt("state", lambda: (workspace / ".ktui" / "history.db").read_text())
attempt("calibration", lambda: (workspace / ".ktui" / "calibration.json").read_text())
attempt("home", lambda: (home / ".ssh" / "id_ed25519").read_text())
attempt("tmp_file", lambda: tempfile.NamedTemporaryFile().close())
attempt("dev_null", lambda: open("/dev/null", "w").write("x"))
attempt("shm", lambda: open(f"/dev/shm/ktui-probe-{os.getpid()}", "w").close())
attempt("proc", lambda: open("/proc/self/comm", "w").write("ktui-probe"))  # the CUDA driver writes /proc
attempt("proc_root", lambda: open(f"/proc/self/root{denied}/history.db").read())  # judged where it leads
attempt("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
attempt("signal", lambda: os.kill(os.getppid(), 0))
attempt("python", lambda: __import__("json.tool"))
attempt("child", lambda: os.system(f"echo x > {denied}/child.txt") == 0 and (denied / "child.txt").read_text())
print(json.dumps(report))
"""


def _probe(tmp_path, env: dict | None = None) -> dict:
    allowed, denied, workspace, home = (tmp_path / name for name in ("allowed", "denied", "ws", "home"))
    for folder in (allowed, denied, workspace / "kernels", workspace / ".ktui", home / ".ssh"):
        folder.mkdir(parents=True)
    (denied / "history.db").write_text("the parent's")
    (workspace / "kernels" / "k.py").write_text("# a kernel\n")
    (workspace / ".ktui" / "history.db").write_text("the workspace's history")
    (workspace / ".ktui" / "calibration.json").write_text("{}")
    (home / ".ssh" / "id_ed25519").write_text("the user's key")
    private = tmp_path / "private-tmp"  # as the runner gives a worker its temp folder (and removes it)
    private.mkdir()
    proc = subprocess.run([sys.executable, "-c", PROBE, str(allowed), str(denied), str(workspace), str(home)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO), TMP_ENV: str(private), "HOME": str(home),
                               **(env or {})})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    report["history"] = (denied / "history.db").read_text()
    report["child_wrote"] = (denied / "child.txt").exists()
    return report


@pytest.mark.unit
def test_every_right_of_the_kernels_abi_is_handled_but_device_ioctls():
    assert write_rights(1) & (REFER | TRUNCATE) == 0
    assert write_rights(2) & REFER and not write_rights(2) & TRUNCATE
    newest = handled_rights(7)
    assert newest & REFER and newest & TRUNCATE
    assert newest & READ_FILE and newest & READ_DIR and newest & EXECUTE  # reads are fenced too
    assert not newest & IOCTL_DEV  # CUDA drives the GPU by ioctls on /dev/nvidia*: never denied


@pytest.mark.worker
@needs_landlock
def test_a_confined_process_reads_and_writes_only_what_it_was_given(tmp_path):
    report = _probe(tmp_path)
    assert report["status"]["confined"] is True
    assert report["status"]["confinement"].startswith(f"landlock ABI {_abi()}: writes, reads, network")
    assert report["allowed"] == "ok" and report["dev_null"] == "ok" and report["python"] == "ok"
    assert report["tmp"] == str(tmp_path / "private-tmp") and report["tmp_file"] == "ok"
    assert report["denied"] == "PermissionError" and report["truncate"] == "PermissionError"
    assert report["read"] == "PermissionError" and report["proc_root"] == "PermissionError"
    assert report["kernel"] == "ok" and report["listing"] == "ok"  # its workspace, but not its state
    assert report["state"] == "PermissionError" and report["home"] == "PermissionError"
    assert report["calibration"] == "ok"  # of its state, only what the benchmark rung reads
    assert report["shm"] == "PermissionError"
    assert report["proc"] == ("ok" if has_gpu_driver() else "PermissionError")  # the CUDA driver's need only
    assert report["inet"] == "OSError" and report["unix"] == "ok"
    assert report["signal"] == ("PermissionError" if _abi() >= SCOPES_ABI else "ok")
    assert report["triton_cache"] == str(compiler_caches() / "triton" / "cache")  # ktui's own
    assert report["history"] == "the parent's"
    assert not report["child_wrote"]  # what it starts (a shell) is confined too


@pytest.mark.worker
def test_no_confine_leaves_the_process_free_and_says_why(tmp_path):
    report = _probe(tmp_path, {NO_CONFINE_ENV: "1"})
    assert report["status"] == {"confined": False, "confinement": f"not confined: {NO_CONFINE_ENV} is set"}
    assert report["denied"] == "ok" and report["home"] == "ok" and report["inet"] == "ok"
    assert report["triton_cache"] is None or "compilers" not in report["triton_cache"]  # never ktui's caches


@pytest.fixture(scope="module")
def confined_run(tmp_path_factory):
    """A failed version in the history, then two kernels that try to rewrite it and their reference."""
    root = make_workspace(tmp_path_factory.mktemp("confined"), fixtures=["wrong_values"],
                          hacks=["rewrites_history", "touches_reference"])
    reference = (root / "references" / "add.py").read_bytes()
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "kernels/wrong_values.py", "kernels/hack_rewrites_history.py",
                "kernels/hack_touches_reference.py", cwd=root, env={NO_CONFINE_ENV: ""})
    return root, reference, by_kernel(parse_events(proc.stdout)), proc


def _history(root) -> dict[str, tuple[str, list[str]]]:
    """kernel → (its recorded verdict, the statuses of its recorded rungs)."""
    db = sqlite3.connect(root / ".ktui" / "history.db")
    try:
        runs = db.execute("SELECT run_id, kernel, verdict FROM runs").fetchall()
        return {kernel: (verdict, [s for (s,) in db.execute("SELECT status FROM rungs WHERE run_id=?", (run_id,))])
                for run_id, kernel, verdict in runs}
    finally:
        db.close()


@pytest.mark.worker
@needs_landlock
def test_a_kernel_cannot_rewrite_the_history_and_its_real_verdict_is_recorded(confined_run):
    root, _, events, proc = confined_run
    assert set(events) == {"wrong_values", "hack_rewrites_history", "hack_touches_reference"}, proc.stderr
    hack = events["hack_rewrites_history"]
    history = _history(root)
    assert history["wrong_values"][0] == "failed" and "failed" in history["wrong_values"][1]
    assert history["hack_rewrites_history"][0] == finished(hack)["verdict"] == "failed"
    failure = rungs(hack)["compile"]  # its first call
    assert failure["status"] == "failed" and "unable to open database file" in failure["message"], failure["message"]
    assert hack[0]["confined"] is True and hack[0]["confinement"].startswith("landlock ABI ")
    assert finished(hack)["summary"]["confined"] is True


@pytest.mark.worker
@needs_landlock
def test_a_kernel_cannot_write_its_reference(confined_run):
    root, reference, events, _ = confined_run
    failure = rungs(events["hack_touches_reference"])["compile"]
    assert failure["status"] == "failed" and "PermissionError" in failure["message"], failure["message"]
    assert (root / "references" / "add.py").read_bytes() == reference


@pytest.mark.worker
def test_an_unconfined_run_says_so_in_its_header_and_summary(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--no-bench", "kernels/add_triton.py", cwd=root, env={NO_CONFINE_ENV: "1"})
    lines = proc.stdout.splitlines()
    header, summary = lines[0], lines[-1]
    assert header.startswith("== add_triton v1") and header.endswith(f"· not confined: {NO_CONFINE_ENV} is set")
    assert summary.startswith("add_triton v1 passed") and f"not confined: {NO_CONFINE_ENV} is set" in summary


@pytest.mark.worker
def test_a_fresh_worker_for_each_run_may_still_write_its_run_folder(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--json", "--cold", "--no-bench", "kernels/add_triton.py", cwd=root)
    events = parse_events(proc.stdout)
    assert rungs(events)["dumps"]["status"] == "ok", rungs(events)["dumps"]["message"]
    assert finished(events)["verdict"] == "passed" and proc.returncode == 0
