"""File-system noise in, "this file now holds new content" out.

Editors and agents rarely write a file in place: vim writes ``4913`` to probe the folder, renames
``k.py`` to ``k.py~`` and writes a new ``k.py``; JetBrains writes ``k.py___jb_tmp___`` and renames
it; agents write ``k.py.tmp`` and ``os.replace`` it. So the watcher observes whole folders
(recursively: ``kernels/`` and ``references/``), never single files — a watch on a file is lost
when the file is replaced — and it judges a save by its result, not its steps: every event names
the real files it touched, and once a file has been quiet for the debounce interval its bytes
are hashed. A new hash is one ``Save``; the same hash (a touch, a no-op write, a revert within
the burst) is nothing.

A file is never hashed half-written. With inotify, a write in place settles only once its writer
has closed the file (``IN_CLOSE_WRITE``, watchdog's ``closed``): ``open(..., "w")`` truncates
first and writes later, and a busy machine can put more than the quiet period between the two. A
file renamed into place is whole at once. Polling sees no opens or closes; there the quiet period
is all there is.

A busy machine also delivers events late: the quiet period after one write can end while the next
write's truncation is still on its way, and the file is read empty. So a file found empty where it
held content is taken for a write in progress, as a file created empty is: it waits for its
writer's close (or ``UNCLOSED_LIMIT_S``: a file emptied on purpose). How many saves a burst of
writes makes depends on its pace as the watcher sees it: writes closer together than the quiet
period are one save; where the writer, or the delivery of its events, pauses longer, there is a
save per pause, of the file as it then was. The last save is always of the final content.

inotify is used where it works; when it is unavailable or out of watches, the watcher falls back
to polling and says so in its ``state``.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch
from watchdog.observers.polling import PollingObserver

try:
    from watchdog.observers.inotify import InotifyObserver
except ImportError:  # not Linux: no close events to wait for
    InotifyObserver = None

from ktui.workspace.kernels import SKIP_PARTS, content_hash

DEFAULT_DEBOUNCE_S = 0.15
POLL_INTERVAL_S = 1.0
# A file written in place whose writer never closes it (inotify dropped the close when its queue
# overflowed, or a tool keeps it open) is hashed anyway once it has been this long without an event.
UNCLOSED_LIMIT_S = 5.0

# Event types that say something was written, renamed or removed. ``opened`` and
# ``closed_no_write`` are left out: hashing a file opens it, and that must not count as a save.
_WRITE_EVENTS = {"created", "modified", "moved", "deleted", "closed"}

# Names editors and tools write next to the real file and then rename or delete.
_TEMP_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".tmp", ".temp", ".bak", ".orig", ".part",
                  "___jb_tmp___", "___jb_old___", ".kate-swp")


@dataclass(frozen=True)
class Save:
    """A watched file whose content changed (``content_hash`` is ``None`` when it was removed)."""

    path: Path
    content_hash: str | None
    seen: float  # monotonic time of the last file-system event of the burst that produced it

    @property
    def removed(self) -> bool:
        return self.content_hash is None


@dataclass(frozen=True)
class WatcherState:
    """How the watcher is watching, for the status bar: ``inotify`` or ``polling`` and why."""

    mode: str  # "inotify" | "polling" | "stopped"
    reason: str = ""  # why polling, when it is a fallback
    folders: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.mode == "polling" and self.reason:
            return f"polling ({self.reason})"
        return self.mode


# Kernels and references are Python; a GPU MODE problem's task.yml decides its shapes.
WATCHED_SUFFIXES = (".py", ".yml", ".yaml")


def is_watched_file(path: Path) -> bool:
    """A file an editor would save as the real thing, not its swap/backup/temp siblings."""
    name = path.name
    if not name.endswith(WATCHED_SUFFIXES) or name.startswith((".", "#")) or name.endswith(_TEMP_SUFFIXES):
        return False
    return not any(part in SKIP_PARTS for part in path.parts)


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _WRITE_EVENTS:
            return
        if event.is_directory:
            if event.event_type in ("deleted", "moved"):
                self.watcher._folder_gone(Path(os.fsdecode(event.src_path)))
            if event.event_type in ("created", "moved"):
                self.watcher._folder_appeared()
            return
        paths = [event.src_path]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(dest)
        # A file renamed into place holds its whole new content now (an agent's temp file and
        # os.replace); one written in place may be written again at once, so it waits.
        done = dest if event.event_type == "moved" else ""
        self.watcher._touched(
            [Path(os.fsdecode(p)) for p in paths], complete=Path(os.fsdecode(done)) if done else None, event=event.event_type
        )


class Watcher:
    """Watches ``folders`` recursively and calls ``on_saves`` (from its own thread) with saves.

    ``folders`` that do not exist yet are picked up when they appear, and one removed or moved
    away and made again (or moved back) is watched anew: each folder's parent is watched too,
    without recursion, for the folder itself coming and going — a watch follows the folder it was
    set on, never the name.
    """

    def __init__(
        self,
        folders: Iterable[Path],
        on_saves: Callable[[list[Save]], None],
        debounce_s: float = DEFAULT_DEBOUNCE_S,
        force_polling: bool = False,
        observer_factory: Callable[[], BaseObserver] = Observer,
        on_state: Callable[[WatcherState], None] | None = None,
    ):
        self.folders = [Path(f).resolve() for f in folders]
        self.on_saves = on_saves
        self.on_state = on_state
        self.debounce_s = debounce_s
        self._force_polling = force_polling
        self._observer_factory = observer_factory
        self._observer: BaseObserver | None = None
        self._scheduled: dict[Path, ObservedWatch] = {}  # each folder watched, and each parent of one
        self._handler = _Handler(self)
        self._hashes: dict[Path, str] = {}
        self._pending: dict[Path, float] = {}
        self._completed: dict[Path, float] = {}  # when each file was last renamed into place
        self._unclosed: set[Path] = set()  # written in place, its writer has not closed it yet
        self._emptied: set[Path] = set()  # read empty where it held content, no write since: waited for once
        self._sees_closes = False  # the observer reports closes (inotify), so writes wait for them
        self._cond = threading.Condition()
        self._stopping = False
        self._flusher: threading.Thread | None = None
        self.state = WatcherState("stopped")

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> WatcherState:
        """Remember what every watched file holds now (no saves for it), then start observing."""
        for folder in self.folders:
            for path in _python_files(folder):
                self._remember(path)
        if self._force_polling:
            self._start_observer(polling=True, reason="--poll")
        else:
            try:
                self._start_observer(polling=False)
            except OSError as exc:
                self._start_observer(polling=True, reason=_inotify_problem(exc))
        self._flusher = threading.Thread(target=self._flush_loop, name="ktui-watch-debounce", daemon=True)
        self._flusher.start()
        return self.state

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        if self._flusher is not None:
            self._flusher.join(timeout=5)
        self._set_state(WatcherState("stopped"))

    def known_hash(self, path: Path) -> str | None:
        """The content hash the watcher last saw for ``path`` (None if it has not seen it)."""
        with self._cond:
            return self._hashes.get(Path(path).resolve())

    # -- observers -----------------------------------------------------------------------------
    def _start_observer(self, polling: bool, reason: str = "") -> None:
        observer = PollingObserver(timeout=POLL_INTERVAL_S) if polling else self._observer_factory()
        self._scheduled = {}
        try:
            self._schedule_all(observer)
            observer.start()
        except OSError:
            observer.stop()
            raise
        self._observer = observer
        self._sees_closes = not polling and InotifyObserver is not None and isinstance(observer, InotifyObserver)
        if not self._sees_closes:
            with self._cond:
                self._unclosed.clear()
        self._set_state(WatcherState("polling" if polling else "inotify", reason, self._watched()))

    def _watched(self) -> tuple[str, ...]:
        return tuple(str(f) for f in self._scheduled)

    def _schedule_all(self, observer: BaseObserver) -> None:
        for folder in self.folders:
            if folder.is_dir() and folder not in self._scheduled:
                self._scheduled[folder] = observer.schedule(self._handler, str(folder), recursive=True)
            # Where it comes and goes from (and appears, when it is not there yet), without descending.
            parent = folder.parent
            if parent.is_dir() and parent not in self._scheduled and not self._in_watched_folder(parent):
                self._scheduled[parent] = observer.schedule(self._handler, str(parent), recursive=False)

    def _folder_appeared(self) -> None:
        """A folder was created or moved in: if it is a watched one that was missing, watch it."""
        missing = [f for f in self.folders if f not in self._scheduled and f.is_dir()]
        if not missing or self._observer is None:
            return
        try:
            self._schedule_all(self._observer)
        except OSError as exc:
            if self.state.mode == "inotify":
                old = self._observer
                old.stop()
                self._start_observer(polling=True, reason=_inotify_problem(exc))
        else:
            self._set_state(dataclasses.replace(self.state, folders=self._watched()))
        for folder in missing:
            self._touched(_python_files(folder))

    def _folder_gone(self, path: Path) -> None:
        """A folder was removed or moved away: if it is a watched one, its watch (which followed it,
        or ended with it) is dropped and its files are reported gone; made again, or moved back,
        it is watched anew (``_folder_appeared``), at once when that has already happened."""
        if path not in self.folders or path not in self._scheduled or self._observer is None:
            return
        watch = self._scheduled.pop(path)
        try:
            self._observer.unschedule(watch)
        except (KeyError, OSError):
            pass  # its emitter ended with the folder
        self._set_state(dataclasses.replace(self.state, folders=self._watched()))
        with self._cond:
            known = [p for p in self._hashes if p.is_relative_to(path)]
        self._touched(known)
        self._folder_appeared()

    def _set_state(self, state: WatcherState) -> None:
        self.state = state
        if self.on_state is not None:
            self.on_state(state)

    # -- events → saves ------------------------------------------------------------------------
    def _touched(self, paths: Iterable[Path], complete: Path | None = None, event: str = "") -> None:
        """Files an event named. The debounce adapts: a file renamed into place is complete and is
        hashed at once — unless one was renamed there moments ago too (a burst of saves), then like
        a write in place it waits for the quiet period, one save per burst. A write in place (or a
        file created empty, its bytes still to come) waits for its writer's close as well."""
        now = time.monotonic()
        with self._cond:
            added = False
            for path in paths:
                if self._in_watched_folder(path) and is_watched_file(path):
                    self._emptied.discard(path)  # written since: an empty read is waited for again
                    if self._sees_closes and event:
                        if event == "modified" or (event == "created" and _is_empty(path)):
                            self._unclosed.add(path)
                        else:  # closed after writing, renamed into place, renamed away or removed
                            self._unclosed.discard(path)
                    at_once = path == complete and now - self._completed.get(path, -1e9) > self.debounce_s
                    self._pending[path] = now - self.debounce_s if at_once else now
                    if path == complete:
                        self._completed[path] = now
                    added = True
            if added:
                self._cond.notify_all()

    def _in_watched_folder(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in self.folders)

    def _flush_loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    if self._pending:
                        due = min(self._due(p, t) for p, t in self._pending.items())
                        wait = due - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._stopping:
                    return
                now = time.monotonic()
                ready = {p: t for p, t in self._pending.items() if self._due(p, t) <= now}
                for p in ready:
                    del self._pending[p]
                    self._unclosed.discard(p)
            saves = [s for s in (self._settle(p, t) for p, t in sorted(ready.items())) if s is not None]
            if saves:
                try:
                    self.on_saves(saves)
                except Exception:
                    import traceback

                    traceback.print_exc()

    def _due(self, path: Path, seen: float) -> float:
        """When a file last touched at ``seen`` is hashed: after the quiet period, or, while its
        writer still holds it open, once the writer has closed it (or after ``UNCLOSED_LIMIT_S``)."""
        return seen + (UNCLOSED_LIMIT_S if path in self._unclosed else self.debounce_s)

    def _settle(self, path: Path, seen: float) -> Save | None:
        """Hash the file as it is now; a Save only if that differs from what was last seen."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            with self._cond:
                known = self._hashes.pop(path, None)
            return Save(path, None, seen) if known is not None else None
        except OSError:
            return None  # unreadable right now (permissions, a directory): nothing to run
        digest = content_hash(data)  # a run's version of the same bytes: the two compare equal
        with self._cond:
            if self._hashes.get(path) == digest:
                return None
            if not data and self._hashes.get(path) and self._sees_closes and path not in self._emptied:
                self._emptied.add(path)  # truncated by a write whose events are still on their way
                self._unclosed.add(path)
                self._pending[path] = time.monotonic()
                self._cond.notify_all()
                return None
            self._emptied.discard(path)
            self._hashes[path] = digest
        return Save(path, digest, seen)

    def _remember(self, path: Path) -> None:
        try:
            self._hashes[path] = content_hash(path.read_bytes())
        except OSError:
            pass


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _python_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return [p for p in folder.rglob("*") if p.is_file() and is_watched_file(p.relative_to(folder))]


def _inotify_problem(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "inotify is out of watches: raise fs.inotify.max_user_watches"
    if exc.errno == errno.EMFILE:
        return "inotify is out of instances: raise fs.inotify.max_user_instances"
    return f"inotify unavailable: {exc.strerror or exc}"
