"""The history store: versions by content, and safety with two writers or a killed one."""

import multiprocessing
import os
import signal

import pytest

from ktui.history.store import Store
from ktui.protocol.events import RunFinished, RungFinished, RunStarted


def _start(run_id: str, kernel: str = "k", version: int = 1) -> RunStarted:
    return RunStarted(run_id, kernel=kernel, path="/w/kernels/k.py", version=version, content_hash="h", reference="/w/r.py",
                      reference_hash="rh", tier="cpu", device="CPU", arch="sm_90a", run_dir="/w/.ktui/runs/k/1")


@pytest.mark.unit
def test_same_content_is_the_same_version_and_new_content_the_next(tmp_path):
    store = Store(tmp_path / "history.db")
    assert store.version_for("k", "aaa", "/k.py") == 1
    assert store.version_for("k", "bbb", "/k.py") == 2
    assert store.version_for("k", "aaa", "/k.py") == 1
    assert store.version_for("other", "aaa", "/o.py") == 1


@pytest.mark.unit
def test_a_run_is_recorded_with_its_rungs_in_order(tmp_path):
    store = Store(tmp_path / "history.db")
    store.record(_start("r1"))
    store.record(RungFinished("r1", rung="pre-checks", status="ok"))
    store.record(RungFinished("r1", rung="correctness[n=1]", status="failed", figures={"psnr": 3.0}, message="bad"))
    store.record(RunFinished("r1", verdict="failed", summary={"correct": [0, 1]}, duration_s=1.0))
    run = store.latest_run("k")
    assert run.verdict == "failed" and run.summary == {"correct": [0, 1]}
    assert [r["rung"] for r in store.rungs("r1")] == ["pre-checks", "correctness[n=1]"]
    assert store.rungs("r1")[1]["figures"] == {"psnr": 3.0}


@pytest.mark.unit
def test_the_sizes_of_a_reference_version_are_the_newest_pre_checks_that_recorded_them(tmp_path):
    store = Store(tmp_path / "history.db")
    older = [{"shape": {"n": 1}, "inputs": 4, "outputs": 4, "largest": 1}]
    newer = older + [{"shape": {"n": 2}, "unsized": True}]
    for run_id, figures in (("r1", {"sizes": older}), ("r2", {"sizes": newer}), ("r3", {})):
        store.record(_start(run_id))
        store.record(RungFinished(run_id, rung="pre-checks", status="ok", figures=figures))
        store.record(RunFinished(run_id, verdict="passed"))
    assert store.sizes("rh") == newer  # r3's pre-checks failed before sizing: the one before it counts
    assert store.sizes("another reference") == [] and store.sizes("") == []


def _writer(path: str, prefix: str, n: int) -> None:
    store = Store(path)
    for i in range(n):
        version = store.version_for("shared", f"{prefix}-{i}", "/k.py")
        run_id = f"{prefix}-{i}"
        store.record(_start(run_id, "shared", version))
        store.record(RungFinished(run_id, rung="pre-checks", status="ok"))
        store.record(RunFinished(run_id, verdict="passed"))


@pytest.mark.worker
def test_two_processes_writing_at_once_lose_nothing_and_never_share_a_version(tmp_path):
    path = str(tmp_path / "history.db")
    Store(path)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, p, 40)) for p in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = Store(path)
    runs = store.runs("shared")
    assert len(runs) == 80 and all(r.verdict == "passed" for r in runs)
    versions = sorted(v for v, _ in store.iter_versions("shared"))
    assert versions == list(range(1, 81))


def _killed_writer(path: str) -> None:
    store = Store(path)
    store.record(_start("doomed"))
    store.record(RungFinished("doomed", rung="pre-checks", status="ok"))
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.worker
def test_a_run_left_running_by_a_killed_process_is_marked_interrupted_at_the_next_open(tmp_path):
    path = str(tmp_path / "history.db")
    proc = multiprocessing.get_context("spawn").Process(target=_killed_writer, args=(path,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    run = Store(path).latest_run("k")
    assert run.run_id == "doomed" and run.verdict == "interrupted"
    assert f"pid {proc.pid}" in run.message and run.finished is not None


def _live_writer(path: str, started, stop) -> None:
    store = Store(path)
    store.record(_start("live"))
    started.set()
    stop.wait(60)


@pytest.mark.worker
def test_a_live_run_of_another_process_is_not_marked_interrupted(tmp_path):
    path = str(tmp_path / "history.db")
    ctx = multiprocessing.get_context("spawn")
    started, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_live_writer, args=(path, started, stop))
    proc.start()
    try:
        assert started.wait(60)
        assert Store(path).latest_run("k").verdict == "running"  # another ktui's run in flight
    finally:
        stop.set()
        proc.join(60)
    # Its process ended without finishing the run: now it is interrupted.
    assert Store(path).latest_run("k").verdict == "interrupted"


@pytest.mark.unit
def test_a_history_from_before_runs_named_their_process_opens_and_keeps_its_running_rows(tmp_path):
    import sqlite3

    from ktui.history.schema import SCHEMA

    path = tmp_path / "history.db"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA)
    old.execute("INSERT INTO runs (run_id, kernel, version, path, content_hash, reference, tier, device, arch, run_dir,"
                " started) VALUES ('old', 'k', 1, 'k.py', 'h', 'r.py', 'cpu', 'CPU', 'sm_90a', 'd', 1.0)")
    old.commit()
    old.close()
    store = Store(path)
    assert store.latest_run("k").verdict == "running"  # whose it was is unknown: not guessed
    store.record(_start("new"))
    assert {r.run_id for r in store.runs("k")} == {"old", "new"}


@pytest.mark.unit
def test_a_history_from_before_gpus_were_recorded_gains_the_columns_and_keeps_its_runs(tmp_path):
    import dataclasses
    import sqlite3

    from ktui.history.schema import SCHEMA

    path = tmp_path / "history.db"
    old = sqlite3.connect(path)
    old.executescript(SCHEMA)  # the runs table as it was: no gpu, no gpu_uuid
    old.execute("INSERT INTO runs (run_id, kernel, version, path, content_hash, reference, tier, device, arch, run_dir,"
                " started, verdict) VALUES ('old', 'k', 1, 'k.py', 'h', 'r.py', 'gpu', 'NVIDIA H200', 'sm_90a', 'd', 1.0,"
                " 'passed')")
    old.commit()
    old.close()
    assert "gpu" not in {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(runs)")}
    store = Store(path)
    store.record(dataclasses.replace(_start("new"), gpu="1", gpu_uuid="GPU-5e1f"))
    runs = {r.run_id: r for r in store.runs("k")}
    assert (runs["old"].gpu, runs["old"].gpu_uuid) == ("", "")  # not known: not guessed
    assert (runs["new"].gpu, runs["new"].gpu_uuid) == ("1", "GPU-5e1f")


@pytest.mark.unit
def test_a_new_history_carries_the_schema_version_and_an_unnumbered_one_is_numbered_on_open(tmp_path):
    import sqlite3

    from ktui.history.schema import SCHEMA, SCHEMA_VERSION

    fresh = tmp_path / "fresh.db"
    Store(fresh).close()
    assert sqlite3.connect(fresh).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 3
    unnumbered = tmp_path / "unnumbered.db"  # written before the schema was numbered: every column, version 0
    old = sqlite3.connect(unnumbered)
    old.executescript(SCHEMA)
    old.execute("ALTER TABLE runs ADD COLUMN owner_host TEXT NOT NULL DEFAULT ''")
    old.commit()
    old.close()
    Store(unnumbered).close()
    assert sqlite3.connect(unnumbered).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.unit
def test_a_history_at_each_older_schema_is_migrated_step_by_step_and_keeps_its_runs(tmp_path):
    import dataclasses
    import sqlite3

    from ktui.history.schema import MIGRATIONS, SCHEMA_VERSION

    for schema in range(1, SCHEMA_VERSION):
        path = tmp_path / f"schema{schema}.db"
        old = sqlite3.connect(path, isolation_level=None)
        for statement in (s for migration in MIGRATIONS[:schema] for s in migration):
            old.execute(statement)
        old.execute(f"PRAGMA user_version = {schema}")
        old.execute("INSERT INTO runs (run_id, kernel, version, path, content_hash, reference, tier, device, arch,"
                    " run_dir, started, verdict) VALUES ('old', 'k', 1, 'k.py', 'h', 'r.py', 'cpu', 'CPU', 'sm_90a',"
                    " 'd', 1.0, 'passed')")
        old.close()
        store = Store(path)
        store.record(dataclasses.replace(_start("new"), gpu="0"))
        assert {(r.run_id, r.verdict, r.gpu) for r in store.runs("k")} == {("old", "passed", ""), ("new", "running", "0")}
        store.close()
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


@pytest.mark.unit
def test_a_history_of_a_newer_schema_is_refused_in_one_line_and_left_as_it_is(tmp_path):
    import sqlite3

    from ktui.history.schema import SCHEMA_VERSION
    from ktui.protocol.statedir import StateError

    path = tmp_path / "history.db"
    Store(path).close()
    newer = sqlite3.connect(path, isolation_level=None)
    newer.execute("ALTER TABLE runs ADD COLUMN coverage REAL NOT NULL")  # a field a newer ktui requires
    newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer.close()
    before = path.read_bytes()
    with pytest.raises(StateError) as refused:
        Store(path)
    said = str(refused.value)
    assert "\n" not in said and str(path) in said and "newer ktui" in said
    assert f"schema {SCHEMA_VERSION + 1}" in said and "upgrade ktui" in said and "--state-dir DIR" in said
    assert path.read_bytes() == before


@pytest.mark.worker
def test_a_writer_killed_mid_run_leaves_a_readable_history(tmp_path):
    path = str(tmp_path / "history.db")
    store = Store(path)
    store.record(_start("earlier"))
    store.record(RunFinished("earlier", verdict="passed"))
    proc = multiprocessing.get_context("spawn").Process(target=_killed_writer, args=(path,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == -signal.SIGKILL
    again = Store(path)
    runs = {r.run_id: r for r in again.runs("k")}
    assert runs["earlier"].verdict == "passed"
    assert len(again.rungs("doomed")) == 1
    again.record(_start("after"))  # and it still takes writes
    assert {r.run_id for r in again.runs("k")} == {"after", "doomed", "earlier"}
