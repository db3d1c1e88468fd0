"""``ktui context search``: ranked full-text search over ``context/`` with SQLite FTS5.

The index lives in ``context/.index.db``. Files are indexed in windows of ``WINDOW`` lines (so a
match is ranked with its neighbourhood, and reported at its own line); identifiers split at
``_``/``.`` like words, and every query word matches as a prefix, so ``make_layout`` finds
``cute.make_layout`` and ``layout`` finds ``layouts``. Before each search the index is brought up
to date incrementally: only files whose mtime or size changed are read again, and files that
disappeared are dropped.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ktui.agentdocs.sources import NOTE, TEXT_SUFFIXES

INDEX_NAME = ".index.db"
WINDOW = 20
MAX_FILE_BYTES = 8 * 2**20
SNIPPET_CHARS = 160
SCHEMA_VERSION = 1
_WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass
class Hit:
    path: str  # relative to the context folder
    line: int
    snippet: str
    score: float  # bm25: lower is better
    source: str  # the context/<source> folder it came from

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "snippet": self.snippet, "score": round(self.score, 3),
                "source": self.source}


@dataclass
class Refresh:
    scanned: int = 0
    indexed: int = 0
    removed: int = 0


class ContextIndex:
    def __init__(self, context_dir: Path):
        self.root = Path(context_dir).resolve()
        self.db = sqlite3.connect(self.root / INDEX_NAME, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self._schema()

    def _schema(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            self.db.executescript("DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS chunks;")
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS files (id INTEGER PRIMARY KEY, path TEXT UNIQUE, mtime_ns INTEGER, size INTEGER);
            CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(
                name, text, file_id UNINDEXED, first_line UNINDEXED,
                tokenize = "unicode61 remove_diacritics 2", prefix = '2 3'
            );
            """
        )
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    # -- keeping it current ---------------------------------------------------------------------
    def refresh(self) -> Refresh:
        stats = Refresh()
        known = {path: (fid, mtime, size) for fid, path, mtime, size in self.db.execute("SELECT id, path, mtime_ns, size FROM files")}
        seen: set[str] = set()
        with self.db:  # one transaction: a killed refresh leaves the previous index intact
            for path in self._files():
                rel = path.relative_to(self.root).as_posix()
                seen.add(rel)
                stats.scanned += 1
                st = path.stat()
                old = known.get(rel)
                if old is not None and old[1] == st.st_mtime_ns and old[2] == st.st_size:
                    continue
                if old is not None:
                    self._drop(old[0])
                self._index(rel, path, st)
                stats.indexed += 1
            for rel in set(known) - seen:
                self._drop(known[rel][0])
                stats.removed += 1
        return stats

    def _files(self):
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if name == NOTE or (Path(name).suffix.lower() in TEXT_SUFFIXES and not name.startswith(".")):
                    yield path

    def _drop(self, file_id: int) -> None:
        self.db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
        self.db.execute("DELETE FROM files WHERE id = ?", (file_id,))

    def _index(self, rel: str, path: Path, st: os.stat_result) -> None:
        cur = self.db.execute("INSERT INTO files (path, mtime_ns, size) VALUES (?, ?, ?)", (rel, st.st_mtime_ns, st.st_size))
        file_id = cur.lastrowid
        if st.st_size > MAX_FILE_BYTES:
            return
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            return  # binary after all
        lines = data.decode("utf-8", errors="replace").splitlines()
        name = " ".join(Path(rel).with_suffix("").parts)
        rows = [
            (name, "\n".join(lines[i:i + WINDOW]), file_id, i + 1)
            for i in range(0, max(len(lines), 1), WINDOW)
        ]
        self.db.executemany("INSERT INTO chunks (name, text, file_id, first_line) VALUES (?, ?, ?, ?)", rows)

    # -- asking it ------------------------------------------------------------------------------
    def search(self, query: str, limit: int = 20) -> list[Hit]:
        words = [w.lower() for w in _WORD.findall(query)]
        if not words:
            return []
        hits = self._match(" AND ".join(f'"{w}"*' for w in words), words, limit)
        if not hits and len(words) > 1:
            hits = self._match(" OR ".join(f'"{w}"*' for w in words), words, limit)
        return hits

    def _match(self, fts_query: str, words: list[str], limit: int) -> list[Hit]:
        # The file path weighs more than the text: a hit in "cute/layout.py" for "layout" ranks high.
        rows = self.db.execute(
            """
            SELECT files.path, chunks.first_line, chunks.text, bm25(chunks, 4.0, 1.0) AS score
            FROM chunks JOIN files ON files.id = chunks.file_id
            WHERE chunks MATCH ? ORDER BY score LIMIT ?
            """,
            (fts_query, limit),
        ).fetchall()
        return [self._hit(path, first, text, score, words) for path, first, text, score in rows]

    @staticmethod
    def _hit(path: str, first_line: int, text: str, score: float, words: list[str]) -> Hit:
        best, best_count = 0, -1
        lines = text.split("\n")
        for i, line in enumerate(lines):
            tokens = [t.lower() for t in _WORD.findall(line)]
            count = sum(1 for w in words if any(t.startswith(w) for t in tokens))
            if count > best_count:
                best, best_count = i, count
        snippet = " ".join(lines[best].split()) if lines else ""
        if len(snippet) > SNIPPET_CHARS:
            snippet = snippet[: SNIPPET_CHARS - 1] + "…"
        return Hit(path, first_line + best, snippet, score, path.split("/", 1)[0])


def search(context_dir: Path, query: str, limit: int = 20) -> tuple[list[Hit], Refresh]:
    index = ContextIndex(context_dir)
    try:
        refreshed = index.refresh()
        return index.search(query, limit), refreshed
    finally:
        index.close()
