"""The history's tables and their numbered migrations: the schema a file holds is its
``PRAGMA user_version``, checked each time a history is opened.

A file of an older schema is migrated in one transaction (two ktui processes opening it at once
migrate it once); a file of a newer schema, written by a newer ktui, is refused in one line that
says what to do, before anything reads or writes it. To store a new field, append one entry to
``MIGRATIONS`` (its statements take a file from the schema before to the next) and read the field
where the rows are read: never edit an entry that has shipped, a user's file already ran it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ktui.protocol.statedir import StateError

# The first release's tables (schema 1). Every later change is a migration below, not an edit here.
SCHEMA = """
CREATE TABLE IF NOT EXISTS versions (
    kernel TEXT NOT NULL,
    version INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    path TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (kernel, version),
    UNIQUE (kernel, content_hash)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kernel TEXT NOT NULL,
    version INTEGER NOT NULL,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    reference TEXT NOT NULL,
    reference_hash TEXT NOT NULL DEFAULT '',
    tier TEXT NOT NULL,
    device TEXT NOT NULL,
    arch TEXT NOT NULL,
    strict INTEGER NOT NULL DEFAULT 0,
    run_dir TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    verdict TEXT NOT NULL DEFAULT 'running',
    message TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '{}',
    duration_s REAL
);
CREATE INDEX IF NOT EXISTS runs_by_kernel ON runs (kernel, started);
CREATE INDEX IF NOT EXISTS runs_by_reference ON runs (reference_hash, started);
CREATE TABLE IF NOT EXISTS rungs (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    idx INTEGER NOT NULL,
    rung TEXT NOT NULL,
    status TEXT NOT NULL,
    figures TEXT NOT NULL,
    message TEXT NOT NULL,
    error TEXT,
    duration_s REAL NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS artifacts (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    function TEXT NOT NULL,
    bytes INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS profiles (
    kernel TEXT NOT NULL,
    version INTEGER NOT NULL,
    created REAL NOT NULL,
    kind TEXT NOT NULL,
    summary TEXT NOT NULL,
    report_path TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS profiles_by_kernel ON profiles (kernel, created);
CREATE TABLE IF NOT EXISTS pins (
    kernel TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    created REAL NOT NULL
);
"""

# MIGRATIONS[n - 1] takes a file from schema n - 1 to schema n. Append only.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the first release's tables
    tuple(statement.strip() for statement in SCHEMA.split(";") if statement.strip()),
    # 2: each run names the ktui process recording it (a run left by a killed one is marked interrupted)
    ("ALTER TABLE runs ADD COLUMN owner_host TEXT NOT NULL DEFAULT ''",
     "ALTER TABLE runs ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0",
     "ALTER TABLE runs ADD COLUMN owner_start INTEGER NOT NULL DEFAULT 0"),
    # 3: the GPU that ran it ('' before several GPUs were known)
    ("ALTER TABLE runs ADD COLUMN gpu TEXT NOT NULL DEFAULT ''",
     "ALTER TABLE runs ADD COLUMN gpu_uuid TEXT NOT NULL DEFAULT ''"),
)
SCHEMA_VERSION = len(MIGRATIONS)


def schema_of(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def refuse_newer(found: int, path: Path) -> None:
    """StateError when ``path`` holds a schema this ktui does not know: a newer ktui wrote it."""
    if found > SCHEMA_VERSION:
        raise StateError(f"{path} was written by a newer ktui (history schema {found}; this ktui knows up to "
                         f"{SCHEMA_VERSION}): upgrade ktui to use it, or keep this ktui's state elsewhere with "
                         "--state-dir DIR")


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the history on ``conn`` (autocommit) to ``SCHEMA_VERSION``, or refuse a newer one."""
    refuse_newer(schema_of(conn), path)
    if schema_of(conn) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = schema_of(conn)  # another ktui process may have migrated it while this one waited
        refuse_newer(found, path)
        for number in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[number - 1]:
                _apply(conn, statement, unnumbered=found == 0)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _apply(conn: sqlite3.Connection, statement: str, unnumbered: bool) -> None:
    """A file from before the schema was numbered (schema 0) may hold any column added since: for it
    alone, a column already there counts as added."""
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if not (unnumbered and "duplicate column" in str(exc)):
            raise
