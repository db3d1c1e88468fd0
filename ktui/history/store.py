"""The history: every run of every version, in SQLite at ``<root>/.ktui/history.db``.

A consumer of the runs' events like any other. WAL journaling and short transactions make it
safe against a writer killed mid-run and against two ktui processes at once — an agent's
``ktui run`` while the dashboard watches — with a busy timeout instead of "database is locked"
errors. Each run row names the process that records it (host, pid, start time); a row still
"running" whose process is gone was left by a killed ktui and is marked "interrupted" the next
time any ktui opens the history, while a live run of another ktui process is left alone. Its
tables carry a schema number, checked on open (``ktui.history.schema``): an older file is
migrated, a newer one refused in one line.

A *version* is a distinct content of a kernel file: saving the same bytes again re-runs the same
version; any change makes the next version number.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

from ktui.history.schema import SCHEMA_VERSION, migrate, refuse_newer, schema_of
from ktui.protocol import processes
from ktui.protocol.events import INTERRUPTED, ArtifactWritten, Event, RunFinished, RungFinished, RunStarted
from ktui.protocol.statedir import StateError, history_db


@dataclass
class RunRecord:
    run_id: str
    kernel: str
    version: int
    path: str
    content_hash: str
    tier: str
    device: str
    arch: str
    run_dir: str
    started: float
    finished: float | None
    verdict: str
    message: str
    summary: dict[str, Any]
    duration_s: float | None
    strict: bool = False
    reference_hash: str = ""
    gpu: str = ""
    gpu_uuid: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Baseline:
    """An earlier version's benchmark figures, per benchmark rung."""

    version: int
    run_id: str
    started: float
    figures: dict[str, dict[str, Any]]
    speedup: float | None = None  # the run's summary speedup, what "best" is judged by
    verdict: str = "passed"


class Store:
    """One workspace's history; ``Store.of(state)`` opens the one at ``<state>/history.db``."""

    @classmethod
    def of(cls, state: Path) -> Store:
        return cls(history_db(state))

    def __init__(self, path: Path):
        self.path = Path(path)
        self.writable = True  # False: a read-only workspace, its history read as it is
        self.read_only_why = ""
        self.recording = True  # False once the disk filled: runs go on, unrecorded
        self._local = threading.local()
        self._rung_index: dict[str, int] = {}
        try:
            self._open_or_recover()
        except StateError:  # a newer schema, or a file that cannot be used: said by the caller in one line
            self.close()
            raise

    def _open_or_recover(self) -> None:
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self.close()
            if _kind(exc) == "corrupt":
                self._move_aside(exc)
                self._open()
            elif _kind(exc) == "full" or _disk_full(self.path.parent):
                self.writable = False  # read as it is: a connection that writes nothing
                self.stop_recording(exc)
            elif _kind(exc) == "read-only" or not os.access(self.path.parent, os.W_OK):
                self.writable, self.read_only_why = False, str(exc)
            else:
                raise StateError(f"{self.path}: {exc}") from None
            if not self.writable:
                self._conn()  # read as it is: a newer schema is refused here too

    def must_write(self) -> None:
        """StateError naming the folder and ``--state-dir`` when this history is read-only: what
        records runs (``ktui run``, the watch) says so before it starts."""
        if not self.writable and self.read_only_why:
            raise StateError(f"{self.path.parent} cannot be written ({self.read_only_why}): runs are recorded "
                             "there; keep ktui's state elsewhere with --state-dir DIR")

    def _open(self) -> None:
        conn = self._conn()
        if conn.execute("PRAGMA quick_check(1)").fetchone()[0] != "ok":  # a truncated file opens, then fails
            raise sqlite3.DatabaseError("database disk image is malformed")
        migrate(conn, self.path)
        self.mark_interrupted()

    def _move_aside(self, exc: sqlite3.DatabaseError) -> None:
        """A corrupt history is kept for inspection, renamed with the time, and a fresh one started."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(f"{self.path}{suffix}")
            if part.exists():
                part.replace(f"{aside}{suffix}")
        print(f"ktui: {self.path} was corrupt ({exc}): moved aside to {aside.name}; a fresh history started",
              file=sys.stderr, flush=True)

    def stop_recording(self, exc: Exception) -> None:
        """A full disk: the runs go on and print their verdicts; nothing more is recorded."""
        if self.recording:
            self.recording = False
            print(f"ktui: {self.path}: the disk is full ({exc}): recording stopped; the verdicts still print, "
                  "but this history misses these runs", file=sys.stderr, flush=True)

    # -- connections ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.writable:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            elif self.path.exists():  # nobody can write a read-only file system: read it as it is
                conn = self._read_as_it_is()
            else:  # nothing recorded: an empty history
                conn = sqlite3.connect(":memory:", isolation_level=None)
                migrate(conn, self.path)
            conn.row_factory = sqlite3.Row
            if self.writable:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def _read_as_it_is(self) -> sqlite3.Connection:
        """The file, never written; one of an older schema is read through a migrated copy in memory."""
        conn = sqlite3.connect(f"file:{quote(str(self.path))}?immutable=1", uri=True, isolation_level=None)
        found = schema_of(conn)
        refuse_newer(found, self.path)
        if found < SCHEMA_VERSION:
            copy = sqlite3.connect(":memory:", isolation_level=None)
            conn.backup(copy)
            conn.close()
            conn = copy
            migrate(conn, self.path)
        return conn

    class _Tx:
        def __init__(self, conn: sqlite3.Connection):
            self.conn = conn

        def __enter__(self) -> sqlite3.Connection:
            self.conn.execute("BEGIN IMMEDIATE")
            return self.conn

        def __exit__(self, exc_type, exc, tb) -> None:
            self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")

    def _tx(self) -> Store._Tx:
        return Store._Tx(self._conn())

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- runs whose process is gone ------------------------------------------------------------
    def mark_interrupted(self) -> list[str]:
        """Mark "interrupted" the runs left "running" by a ktui process of this host that is gone
        (killed, crashed); return their ids. Runs of a live process, of another host, or from a
        history written before runs named their process are left as they are."""
        if not self.writable:
            return []
        host = socket.gethostname()
        rows = self._conn().execute(
            "SELECT run_id, owner_pid, owner_start FROM runs WHERE verdict='running' AND owner_host=? AND owner_pid>0",
            (host,),
        ).fetchall()
        gone = [r for r in rows if processes.start_ticks(int(r["owner_pid"])) != int(r["owner_start"])]
        now = time.time()
        for r in gone:
            message = f"interrupted: the ktui process running it (pid {r['owner_pid']}) ended before the run finished"
            with self._tx() as db:
                db.execute(
                    "UPDATE runs SET verdict=?, message=?, finished=? WHERE run_id=? AND verdict='running'",
                    (INTERRUPTED, message, now, r["run_id"]),
                )
        return [r["run_id"] for r in gone]

    # -- versions ------------------------------------------------------------------------------
    def version_for(self, kernel: str, content_hash: str, path: str) -> int:
        """The version number of this content: existing if seen before, else the next one (not
        kept once the disk is full)."""
        if self.recording and self.writable:
            try:
                return self._new_version(kernel, content_hash, path)
            except sqlite3.OperationalError as exc:
                if _kind(exc) != "full":
                    raise
                self.stop_recording(exc)
        known = self.version_of_hash(kernel, content_hash)
        if known is not None:
            return known
        return int(self._conn().execute("SELECT COALESCE(MAX(version), 0) + 1 FROM versions WHERE kernel=?",
                                        (kernel,)).fetchone()[0])

    def _new_version(self, kernel: str, content_hash: str, path: str) -> int:
        with self._tx() as db:
            row = db.execute(
                "SELECT version FROM versions WHERE kernel=? AND content_hash=?", (kernel, content_hash)
            ).fetchone()
            if row:
                return int(row["version"])
            nxt = db.execute("SELECT COALESCE(MAX(version), 0) + 1 FROM versions WHERE kernel=?", (kernel,)).fetchone()[0]
            db.execute(
                "INSERT INTO versions (kernel, version, content_hash, path, created) VALUES (?,?,?,?,?)",
                (kernel, nxt, content_hash, path, time.time()),
            )
            return int(nxt)

    # -- the event consumer --------------------------------------------------------------------
    def record(self, event: Event) -> None:
        """Keep ``event``; a full disk stops the recording (said once) instead of the run."""
        if not (self.recording and self.writable):
            return
        try:
            self._record(event)
        except sqlite3.OperationalError as exc:
            if _kind(exc) != "full":
                raise
            self.stop_recording(exc)

    def _record(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            with self._tx() as db:
                db.execute(
                    "INSERT OR REPLACE INTO runs (run_id, kernel, version, path, content_hash, reference, reference_hash,"
                    " tier, device, arch, strict, run_dir, started, owner_host, owner_pid, owner_start, gpu, gpu_uuid)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (event.run_id, event.kernel, event.version, event.path, event.content_hash, event.reference,
                     event.reference_hash, event.tier, event.device, event.arch, int(event.strict), event.run_dir,
                     event.time, *_owner(), event.gpu, event.gpu_uuid),
                )
            self._rung_index[event.run_id] = 0
        elif isinstance(event, RungFinished):
            idx = self._rung_index.get(event.run_id, 0)
            self._rung_index[event.run_id] = idx + 1
            error = json.dumps(_asdict(event.error)) if event.error else None
            with self._tx() as db:
                db.execute(
                    "INSERT OR REPLACE INTO rungs (run_id, idx, rung, status, figures, message, error, duration_s)"
                    " VALUES (?,?,?,?,?,?,?,?)",
                    (event.run_id, idx, event.rung, event.status, json.dumps(event.figures), event.message, error,
                     event.duration_s),
                )
        elif isinstance(event, ArtifactWritten):
            with self._tx() as db:
                db.execute(
                    "INSERT INTO artifacts (run_id, kind, path, function, bytes) VALUES (?,?,?,?,?)",
                    (event.run_id, event.kind, event.path, event.function, event.bytes),
                )
        elif isinstance(event, RunFinished):
            with self._tx() as db:
                db.execute(
                    "UPDATE runs SET finished=?, verdict=?, message=?, summary=?, duration_s=? WHERE run_id=?",
                    (event.time, event.verdict, event.message, json.dumps(event.summary), event.duration_s, event.run_id),
                )
            self._rung_index.pop(event.run_id, None)

    # -- queries -------------------------------------------------------------------------------
    def runs(self, kernel: str | None = None, limit: int | None = None) -> list[RunRecord]:
        sql = "SELECT * FROM runs"
        args: list[Any] = []
        if kernel is not None:
            sql += " WHERE kernel=?"
            args.append(kernel)
        sql += " ORDER BY started DESC, rowid DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [_run_record(r) for r in self._conn().execute(sql, args).fetchall()]

    def latest_run(self, kernel: str) -> RunRecord | None:
        runs = self.runs(kernel, limit=1)
        return runs[0] if runs else None

    def rungs(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute("SELECT * FROM rungs WHERE run_id=? ORDER BY idx", (run_id,)).fetchall()
        return [
            {
                "rung": r["rung"],
                "status": r["status"],
                "figures": json.loads(r["figures"]),
                "message": r["message"],
                "error": json.loads(r["error"]) if r["error"] else None,
                "duration_s": r["duration_s"],
            }
            for r in rows
        ]

    def rung_results(self, run_ids: list[str], rung: str) -> dict[str, dict[str, Any]]:
        """One rung's status, figures and message in each of these runs, in one query: the
        dashboard's history charts a fact per version (the dumps rung's registers) at one go."""
        out: dict[str, dict[str, Any]] = {}
        ids = list(run_ids)
        for start in range(0, len(ids), 500):  # under SQLite's limit on parameters
            chunk = ids[start:start + 500]
            rows = self._conn().execute(
                f"SELECT run_id, status, figures, message FROM rungs WHERE rung=? AND run_id IN ({','.join('?' * len(chunk))})",
                (rung, *chunk),
            ).fetchall()
            for r in rows:
                out[r["run_id"]] = {"status": r["status"], "figures": json.loads(r["figures"]), "message": r["message"]}
        return out

    def sizes(self, reference_hash: str, look_back: int = 20) -> list[dict[str, Any]]:
        """The memory each shape of this reference version needs, as the newest run against it
        that sized them recorded (its pre-checks' ``sizes``): the next job carries them, so a
        worker sizes a reference once (``ktui.worker.memory``). Empty when none did."""
        if not reference_hash:
            return []
        rows = self._conn().execute(
            "SELECT g.figures FROM runs r JOIN rungs g ON g.run_id=r.run_id WHERE r.reference_hash=?"
            " AND g.rung='pre-checks' ORDER BY r.started DESC, r.rowid DESC LIMIT ?",
            (reference_hash, int(look_back)),
        ).fetchall()
        for row in rows:
            sizes = json.loads(row["figures"]).get("sizes")
            if isinstance(sizes, list) and sizes:
                return sizes
        return []

    def artifacts(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._conn().execute("SELECT * FROM artifacts WHERE run_id=?", (run_id,)).fetchall()
        return [dict(r) for r in rows]

    def benchmark_baselines(self, kernel: str, device: str, reference_hash: str, exclude_version: int,
                            limit: int = 200) -> list[Baseline]:
        """The newest passed GPU run of every other version of ``kernel`` on ``device`` against the
        same reference, with its ok benchmark rungs' figures — what a new version is compared with."""
        rows = self._conn().execute(
            "SELECT run_id, version, started, summary FROM runs WHERE kernel=? AND device=? AND reference_hash=? AND version!=?"
            " AND tier='gpu' AND verdict='passed' ORDER BY started DESC, rowid DESC LIMIT ?",
            (kernel, device, reference_hash, exclude_version, int(limit)),
        ).fetchall()
        out: list[Baseline] = []
        seen: set[int] = set()
        for row in rows:
            if row["version"] in seen:
                continue
            rungs = self._conn().execute(
                "SELECT rung, figures FROM rungs WHERE run_id=? AND status='ok' AND rung LIKE 'benchmark[%' ORDER BY idx",
                (row["run_id"],),
            ).fetchall()
            if rungs:
                seen.add(row["version"])
                speedup = json.loads(row["summary"] or "{}").get("speedup")
                out.append(Baseline(int(row["version"]), row["run_id"], row["started"],
                                    {r["rung"]: json.loads(r["figures"]) for r in rungs},
                                    float(speedup) if isinstance(speedup, (int, float)) else None))
        return out

    def other_devices(self, kernel: str, device: str, reference_hash: str, exclude_version: int) -> list[str]:
        """The other GPU models that other versions of ``kernel`` passed on against the same
        reference: the runs ``benchmark_baselines`` leaves out of a comparison on ``device``."""
        rows = self._conn().execute(
            "SELECT DISTINCT device FROM runs WHERE kernel=? AND device!=? AND reference_hash=? AND version!=?"
            " AND tier='gpu' AND verdict='passed' ORDER BY device",
            (kernel, device, reference_hash, exclude_version),
        ).fetchall()
        return [r["device"] for r in rows]

    def iter_versions(self, kernel: str) -> Iterator[tuple[int, str]]:
        for r in self._conn().execute("SELECT version, content_hash FROM versions WHERE kernel=? ORDER BY version", (kernel,)):
            yield int(r[0]), r[1]

    def version_of_hash(self, kernel: str, content_hash: str) -> int | None:
        """The version that holds exactly this content, without creating one."""
        row = self._conn().execute(
            "SELECT version FROM versions WHERE kernel=? AND content_hash=?", (kernel, content_hash)
        ).fetchone()
        return int(row[0]) if row else None

    # -- the diff baseline ---------------------------------------------------------------------
    def pin(self, kernel: str, version: int) -> None:
        """Make ``version`` the kernel's diff baseline (``ktui diff --base pinned``, the dashboard's ``b``)."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO pins (kernel, version, created) VALUES (?,?,?)", (kernel, version, time.time()))

    def unpin(self, kernel: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM pins WHERE kernel=?", (kernel,))

    def pinned(self, kernel: str) -> int | None:
        row = self._conn().execute("SELECT version FROM pins WHERE kernel=?", (kernel,)).fetchone()
        return int(row[0]) if row else None

    # -- profiles ------------------------------------------------------------------------------
    def record_profile(self, kernel: str, version: int, kind: str, summary: dict[str, Any], report_path: str = "") -> None:
        """Keep a profile (``kind``: "ncu", "sections") of one version in the history."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO profiles (kernel, version, created, kind, summary, report_path) VALUES (?,?,?,?,?,?)",
                (kernel, version, time.time(), kind, json.dumps(summary, default=str), report_path),
            )

    def profiles(self, kernel: str, kind: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Newest first: ``{kernel, version, created, kind, summary, report_path}``."""
        sql = "SELECT * FROM profiles WHERE kernel=?"
        args: list[Any] = [kernel]
        if kind is not None:
            sql += " AND kind=?"
            args.append(kind)
        sql += " ORDER BY created DESC, rowid DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        rows = self._conn().execute(sql, args).fetchall()
        return [{**dict(r), "summary": json.loads(r["summary"])} for r in rows]


def _owner() -> tuple[str, int, int]:
    """This process, as a run row names its owner: host, pid and start time (a pid is reused)."""
    pid = os.getpid()
    return socket.gethostname(), pid, processes.start_ticks(pid) or 0


def _run_record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        run_id=row["run_id"],
        kernel=row["kernel"],
        version=row["version"],
        path=row["path"],
        content_hash=row["content_hash"],
        tier=row["tier"],
        device=row["device"],
        arch=row["arch"],
        run_dir=row["run_dir"],
        started=row["started"],
        finished=row["finished"],
        verdict=row["verdict"],
        message=row["message"],
        summary=json.loads(row["summary"] or "{}"),
        duration_s=row["duration_s"],
        strict=bool(row["strict"]),
        reference_hash=row["reference_hash"],
        gpu=row["gpu"],
        gpu_uuid=row["gpu_uuid"],
    )


def _asdict(obj: Any) -> Any:
    import dataclasses

    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def _disk_full(folder: Path) -> bool:
    """No room left for SQLite's next page (its error is then "disk I/O error" as often as "full")."""
    try:
        return shutil.disk_usage(folder).free < 64 * 1024
    except OSError:
        return False


def _kind(exc: sqlite3.DatabaseError) -> str:
    """``corrupt`` (not a database, malformed), ``read-only``, ``full`` or ``other``."""
    said = str(exc).lower()
    if "not a database" in said or "malformed" in said:
        return "corrupt"
    if "readonly" in said or "read-only" in said or "unable to open" in said:
        return "read-only"
    if "disk is full" in said:
        return "full"
    return "other"
