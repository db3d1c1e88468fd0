"""The history in a bad state, for real: a corrupt file (garbage, truncated), a full disk (a small
tmpfs) and a read-only workspace (a read-only bind mount). Each is said in one line naming the
file and the way forward, never a traceback; "could not run" exits 2."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import ktui, make_workspace

from ktui.history.store import Store


def _mount(*args: str) -> None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} is not permitted here: {proc.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "--lazy", str(path)], check=True)  # lazy: a worker may still be ending


def _runs(state: Path) -> list:
    store = Store.of(state)
    try:
        return store.runs()
    finally:
        store.close()


@pytest.mark.worker
def test_a_garbage_history_is_moved_aside_with_a_timestamp_and_a_fresh_one_started(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / ".ktui").mkdir()
    garbage = uuid.uuid4().bytes * 300
    (ws / ".ktui" / "history.db").write_bytes(garbage)
    proc = ktui("history", "kernels/add_triton.py", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and f"{ws}/.ktui/history.db was corrupt" in proc.stderr
    aside = [p for p in (ws / ".ktui").iterdir() if p.name.startswith("history.db.corrupt-")]
    assert [p.read_bytes() for p in aside] == [garbage]
    assert aside[0].name in proc.stderr and "a fresh history started" in proc.stderr
    assert "no runs recorded yet" in proc.stdout


@pytest.mark.unit
def test_a_truncated_history_is_moved_aside_and_a_fresh_one_started(tmp_path):
    path = tmp_path / "history.db"
    store = Store(path)
    for n in range(300):
        store.version_for(f"kernel{n}", f"hash{n}", f"kernels/k{n}.py")
    store.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    store = Store(path)
    try:
        assert store.version_for("kernel0", "another", "kernels/k0.py") == 1  # a fresh history
    finally:
        store.close()
    assert len(list(tmp_path.glob("history.db.corrupt-*[0-9]"))) == 1  # with its -wal and -shm, if any


@pytest.mark.worker
def test_a_full_disk_stops_the_recording_says_so_once_and_the_verdicts_still_print(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    state = ws / ".ktui"
    state.mkdir()
    _mount("-t", "tmpfs", "-o", "size=512k", "tmpfs", str(state))
    try:
        assert ktui("history", "kernels/add_triton.py", cwd=ws).returncode == 0  # the history made, empty
        subprocess.run(["dd", "if=/dev/zero", f"of={state}/filler", "bs=4k"], capture_output=True)  # until full
        proc = ktui("run", "--no-audit", "kernels/add_triton.py", "--no-bench", "--seed", "1", cwd=ws)
        runs = [(r.kernel, r.verdict) for r in _runs(state)]
    finally:
        _umount(state)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "add_triton v1 " in proc.stdout and proc.returncode in (0, 1), proc.stdout + proc.stderr
    assert proc.stderr.count("the disk is full") == 1 and f"{state}/history.db" in proc.stderr
    assert "recording stopped" in proc.stderr
    assert runs in ([], [("add_triton", "running")]) or all(verdict != "running" for _, verdict in runs)


@pytest.mark.worker
def test_a_read_only_workspace_is_read_by_history_refused_by_run_naming_state_dir_which_works(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    first = ktui("run", "--no-audit", "kernels/add_triton.py", "--no-bench", "--seed", "1", cwd=ws)
    assert first.returncode == 0, first.stdout + first.stderr
    _mount("--bind", str(ws), str(ws))
    try:
        _mount("-o", "remount,ro,bind", str(ws))
        history = ktui("history", "kernels/add_triton.py", cwd=ws)
        diff = ktui("diff", "kernels/add_triton.py", cwd=ws)
        run = ktui("run", "--no-audit", "kernels/add_triton.py", "--no-bench", cwd=ws)
        watch = ktui("watch", ".", cwd=ws, timeout=120)
        elsewhere = tmp_path / "state"
        moved = ktui("run", "--no-audit", "kernels/add_triton.py", "--no-bench", "--seed", "2", "--state-dir", str(elsewhere), cwd=ws)
    finally:
        _umount(ws)
    assert history.returncode == 0 and "add_triton v1 passed" in history.stdout, history.stdout + history.stderr
    assert "Traceback" not in diff.stderr and diff.returncode != 2, diff.stderr
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and f"{ws}/.ktui" in run.stderr and "--state-dir DIR" in run.stderr
    assert watch.returncode == 2 and "--state-dir DIR" in watch.stderr, watch.stdout + watch.stderr
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert [(r.kernel, r.verdict) for r in _runs(elsewhere)] == [("add_triton", "passed")]
    shutil.rmtree(elsewhere)


@pytest.mark.worker
def test_a_history_from_a_newer_ktui_is_refused_by_run_and_history_in_one_line_and_left_as_it_is(tmp_path):
    import sqlite3

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    assert ktui("history", "kernels/add_triton.py", cwd=ws).returncode == 0  # the history made, empty
    path = ws / ".ktui" / "history.db"
    newer = sqlite3.connect(path, isolation_level=None)
    newer.execute("ALTER TABLE runs ADD COLUMN coverage REAL NOT NULL")  # a field a newer ktui requires
    newer.execute("PRAGMA user_version = 1000")
    newer.close()
    before = path.read_bytes()
    run = ktui("run", "--no-audit", "kernels/add_triton.py", "--no-bench", "--seed", "1", cwd=ws)
    history = ktui("history", "kernels/add_triton.py", cwd=ws)
    for proc in (run, history):
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
        assert proc.stderr.count("\n") == 1 and f"{path} was written by a newer ktui" in proc.stderr
        assert "upgrade ktui" in proc.stderr and "--state-dir DIR" in proc.stderr
    assert path.read_bytes() == before


@pytest.mark.worker
def test_an_audit_of_a_read_only_workspace_prints_its_verdict_and_says_in_one_line_it_was_not_cached(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / ".ktui").mkdir()
    _mount("--bind", str(ws), str(ws))
    try:
        _mount("-o", "remount,ro,bind", str(ws))
        audit = ktui("audit", "--cpu", "--seed", "1", "kernels/add_triton.py", cwd=ws)
        elsewhere = tmp_path / "state"
        kept = ktui("audit", "--cpu", "--seed", "1", "kernels/add_triton.py", "--state-dir", str(elsewhere), cwd=ws)
    finally:
        _umount(ws)
    assert audit.returncode == 0 and "Traceback" not in audit.stderr, audit.stdout + audit.stderr
    assert "add: strong" in audit.stdout
    assert audit.stderr.count("\n") == 1 and "add: the verdict is not cached" in audit.stderr
    assert f"{ws}/.ktui/audits cannot be written" in audit.stderr and "--state-dir DIR" in audit.stderr
    assert kept.returncode == 0 and kept.stderr == "", kept.stdout + kept.stderr
    assert len(list((elsewhere / "audits").glob("*.json"))) == 1


@pytest.mark.worker
def test_a_read_only_history_of_an_older_schema_is_read_through_a_migrated_copy_and_left_as_it_is(tmp_path):
    import sqlite3

    from ktui.protocol.events import RunFinished, RunStarted

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    path = ws / ".ktui" / "history.db"
    store = Store(path)
    store.record(RunStarted("r1", kernel="add_triton", path=str(ws / "kernels/add_triton.py"), version=1,
                            content_hash="h", reference=str(ws / "references/add.py"), reference_hash="rh",
                            tier="cpu", device="CPU", arch="sm_90a", run_dir=str(ws / ".ktui/runs/add_triton/1")))
    store.record(RunFinished("r1", verdict="passed", message="", duration_s=1.0))
    store.close()
    older = sqlite3.connect(path, isolation_level=None)  # back to schema 1: before runs named their process or GPU
    for column in ("owner_host", "owner_pid", "owner_start", "gpu", "gpu_uuid"):
        older.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    older.execute("PRAGMA user_version = 1")
    older.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    older.close()
    before = path.read_bytes()
    _mount("--bind", str(ws), str(ws))
    try:
        _mount("-o", "remount,ro,bind", str(ws))
        history = ktui("history", "kernels/add_triton.py", cwd=ws)
    finally:
        _umount(ws)
    assert history.returncode == 0 and history.stderr == "", history.stdout + history.stderr
    assert "add_triton v1 passed" in history.stdout
    assert path.read_bytes() == before
