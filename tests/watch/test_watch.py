"""The watcher: editors' and agents' ways of saving become exactly one save of the real file.

No test here depends on the machine's pace. The quiet period a burst of writes must fit in is made
far longer than any pause a loaded machine puts between an editor's steps; what a test waits for is
the save it needs (a safety timeout aside); a burst whose pace the test cannot fix is judged by
what holds at any pace; and where events must arrive late, the test holds them back itself.
"""

from __future__ import annotations

import errno
import os
import queue
import threading
import time
from pathlib import Path
from typing import Callable

import pytest
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers.inotify import InotifyObserver

from ktui.watch import watcher as watcher_module
from ktui.watch.watcher import Save, Watcher, is_watched_file
from ktui.workspace.kernels import content_hash

pytestmark = pytest.mark.unit

DEBOUNCE = 0.5  # the quiet period: far longer than a loaded machine's pause between an editor's steps
QUIET = 2 * DEBOUNCE  # a window in which a save that was coming has come
WAIT = 30.0  # a safety net: a save the test needs comes long before


class Saves:
    """Collects saves from the watcher thread; ``wait`` returns those of one burst."""

    def __init__(self):
        self.q: queue.Queue[Save] = queue.Queue()

    def __call__(self, saves: list[Save]) -> None:
        for s in saves:
            self.q.put(s)

    def wait(self, timeout: float = WAIT, quiet: float = QUIET) -> list[Save]:
        got = [self.q.get(timeout=timeout)]
        while True:
            try:
                got.append(self.q.get(timeout=quiet))
            except queue.Empty:
                return got

    def wait_for(self, content: bytes, timeout: float = WAIT) -> list[Save]:
        """Every save up to the one of ``content``."""
        got = [self.q.get(timeout=timeout)]
        while got[-1].content_hash != content_hash(content):
            got.append(self.q.get(timeout=timeout))
        return got

    def none(self, within: float = 1.0) -> bool:
        try:
            self.q.get(timeout=within)
        except queue.Empty:
            return True
        return False


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.py").write_text("v = 1\n")
    return tmp_path / "kernels"


@pytest.fixture
def watched(folder):
    saves = Saves()
    watcher = Watcher([folder], saves, debounce_s=DEBOUNCE)
    watcher.start()
    yield folder, saves, watcher
    watcher.stop()


class HeldBack(InotifyObserver):
    """inotify whose events the test holds back, as a loaded machine delays them: they reach the
    watcher in order, when the test lets them through."""

    def __init__(self):
        super().__init__()
        self._gate = threading.Condition()
        self._holding = False
        self._through: Callable[[FileSystemEvent], bool] | None = None

    def schedule(self, event_handler, path, **kwargs):
        return super().schedule(_HeldHandler(event_handler, self), path, **kwargs)

    def hold(self) -> None:
        with self._gate:
            self._holding = True

    def release_through(self, last: Callable[[FileSystemEvent], bool]) -> None:
        """Let the held events through up to the first that ``last`` accepts; hold the rest."""
        with self._gate:
            self._through = last
            self._gate.notify_all()

    def release(self) -> None:
        with self._gate:
            self._holding, self._through = False, None
            self._gate.notify_all()

    def turn(self, event: FileSystemEvent) -> None:
        with self._gate:
            while self._holding and self._through is None:
                self._gate.wait()
            if self._holding and self._through(event):
                self._through = None


class _HeldHandler(FileSystemEventHandler):
    def __init__(self, handler: FileSystemEventHandler, observer: HeldBack):
        self.handler, self.observer = handler, observer

    def dispatch(self, event: FileSystemEvent) -> None:
        self.observer.turn(event)
        self.handler.dispatch(event)


class Reads(FileSystemEventHandler):
    """A second observer's view of a folder: each file closed by a reader (the watcher hashing it)."""

    def __init__(self):
        self.closed: queue.Queue[str] = queue.Queue()

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type == "closed_no_write":
            self.closed.put(os.path.basename(event.src_path))


def test_an_agents_temp_file_and_rename_is_one_save_of_the_real_file(watched):
    folder, saves, _ = watched
    tmp = folder / "k.py.tmp"
    tmp.write_text("v = 2\n")
    os.replace(tmp, folder / "k.py")
    got = saves.wait()
    assert [s.path.name for s in got] == ["k.py"]
    assert got[0].content_hash is not None


def test_vims_probe_file_backup_rename_and_rewrite_is_one_save(watched):
    folder, saves, _ = watched
    probe = folder / "4913"
    probe.write_text("")
    probe.unlink()
    os.rename(folder / "k.py", folder / "k.py~")
    (folder / "k.py").write_text("v = 3\n")
    (folder / "k.py~").unlink()
    got = saves.wait()
    assert [(s.path.name, s.removed) for s in got] == [("k.py", False)]


def test_jetbrains_safe_write_is_one_save(watched):
    folder, saves, _ = watched
    tmp = folder / "k.py___jb_tmp___"
    tmp.write_text("v = 4\n")
    os.rename(folder / "k.py", folder / "k.py___jb_old___")
    os.rename(tmp, folder / "k.py")
    (folder / "k.py___jb_old___").unlink()
    got = saves.wait()
    assert [s.path.name for s in got] == ["k.py"]


def test_writing_the_same_bytes_again_is_not_a_save(watched):
    folder, saves, _ = watched
    (folder / "k.py").write_text("v = 1\n")  # unchanged content
    assert saves.none(within=QUIET)


def test_a_burst_of_writes_ends_in_a_save_of_the_final_content_and_saves_nothing_half_written(folder):
    """At any pace: writes closer than the quiet period are one save (the dashboard's benchmark counts
    them); where the writer or its events pause longer (a loaded machine), a save per pause, each of
    one whole write, in the order written, the last of the final content."""
    saves = Saves()
    watcher = Watcher([folder], saves, debounce_s=0.05)
    watcher.start()
    try:
        writes = [f"v = {i + 10}\n".encode() for i in range(30)]
        for data in writes:
            (folder / "k.py").write_bytes(data)
            time.sleep(0.005)
        got = saves.wait_for(writes[-1])
        assert saves.none(within=QUIET)  # and nothing after it
        hashes = [content_hash(data) for data in writes]
        assert all(s.content_hash in hashes for s in got), "a save of a file no write left whole"
        order = [hashes.index(s.content_hash) for s in got]
        assert order == sorted(set(order))
        assert watcher.known_hash(folder / "k.py") == hashes[-1]
    finally:
        watcher.stop()


def test_a_file_read_empty_by_the_next_writes_truncation_waits_for_that_writer_though_its_events_come_late(folder):
    """A loaded machine delivers events late: the quiet period after one write ends while the next
    write's truncation is still on its way, and the watcher reads the file empty. It must not save
    that: it waits for the writer, and saves what the writer wrote."""
    held, saves, reads = HeldBack(), Saves(), Reads()
    watcher = Watcher([folder], saves, debounce_s=0.05, observer_factory=lambda: held)
    watcher.start()
    second = InotifyObserver()
    second.schedule(reads, str(folder))
    second.start()
    try:
        held.hold()
        (folder / "k.py").write_text("v = 2\n")
        with open(folder / "k.py", "w") as writer:  # the next write: truncated now, its events held back
            held.release_through(lambda e: e.event_type == "closed")  # the first write reaches the watcher
            assert reads.closed.get(timeout=WAIT) == "k.py"  # quiet since, it has read the file: empty
            held.release()  # the truncation reaches it only now
            writer.write("v = 3\n")
        got = saves.wait_for(b"v = 3\n")
    finally:
        held.release()
        second.stop()
        second.join()
        watcher.stop()
    assert [s.content_hash for s in got] == [content_hash(b"v = 3\n")]


def test_a_file_emptied_on_purpose_is_saved_empty_once_no_writer_follows(watched, monkeypatch):
    monkeypatch.setattr(watcher_module, "UNCLOSED_LIMIT_S", 0.5)
    folder, saves, watcher = watched
    (folder / "k.py").write_text("")
    assert [s.content_hash for s in saves.wait_for(b"")] == [content_hash(b"")]
    assert watcher.known_hash(folder / "k.py") == content_hash(b"")


def test_a_file_held_open_mid_write_is_saved_once_its_writer_closes_it_never_half_written(watched):
    folder, saves, watcher = watched
    with open(folder / "k.py", "w") as f:  # truncated now, like every write in place
        f.write("v = 1\n# half")
        f.flush()
        # far longer than the 50 ms quiet period: a busy machine's pause between truncate and write
        assert saves.none(within=QUIET)
        f.write(" and whole\n")
    got = saves.wait()
    assert [s.content_hash for s in got] == [content_hash(b"v = 1\n# half and whole\n")]
    assert watcher.known_hash(folder / "k.py") == got[0].content_hash


def test_swap_backup_and_hidden_files_and_ktui_output_are_ignored(watched, tmp_path):
    folder, saves, _ = watched
    (folder / ".k.py.swp").write_text("x")
    (folder / "k.py~").write_text("x")
    (folder / "#k.py#").write_text("x")
    (folder / "notes.txt").write_text("x")
    (folder / ".ktui").mkdir()
    (folder / ".ktui" / "latest.py").write_text("x")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "k.py").write_text("x")
    assert saves.none(within=QUIET)


def test_a_new_kernel_in_a_new_subfolder_is_a_save_and_a_removed_one_is_a_removal(watched):
    folder, saves, _ = watched
    (folder / "softmax").mkdir()
    (folder / "softmax" / "softmax_v2.py").write_text("x = 1\n")
    got = saves.wait()
    assert [s.path.relative_to(folder).as_posix() for s in got] == ["softmax/softmax_v2.py"]
    (folder / "softmax" / "softmax_v2.py").unlink()
    got = saves.wait()
    assert got[0].removed


def test_a_missing_folder_is_watched_once_it_appears(tmp_path):
    saves = Saves()
    watcher = Watcher([tmp_path / "kernels"], saves, debounce_s=0.05)
    watcher.start()
    try:
        (tmp_path / "kernels").mkdir()
        (tmp_path / "kernels" / "add_new.py").write_text("x = 1\n")  # found when the folder is
        assert [s.path.name for s in saves.wait()] == ["add_new.py"]
        (tmp_path / "kernels" / "add_newer.py").write_text("x = 2\n")  # then heard: it is watched
        assert [s.path.name for s in saves.wait()] == ["add_newer.py"]
    finally:
        watcher.stop()


class States:
    """Collects the watcher's states from its threads; ``until`` waits for one that ``holds``."""

    def __init__(self):
        self.q: queue.Queue = queue.Queue()

    def __call__(self, state) -> None:
        self.q.put(state)

    def until(self, holds, timeout: float = 30.0):
        deadline = time.monotonic() + timeout
        while True:
            state = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            if holds(state):
                return state


@pytest.mark.parametrize("how", ["removed and made again", "moved away and back"])
@pytest.mark.parametrize("polling", [False, True], ids=["inotify", "polling"])
def test_a_kernels_folder_removed_or_moved_away_and_back_is_watched_anew(tmp_path, how, polling):
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "k.py").write_text("v = 1\n")
    saves, states = Saves(), States()
    watcher = Watcher([folder], saves, debounce_s=0.05, force_polling=polling, on_state=states)
    watcher.start()
    try:
        if how == "removed and made again":
            (folder / "k.py").unlink()
            folder.rmdir()
        else:
            folder.rename(tmp_path / "away")
        assert [(s.path.name, s.removed) for s in saves.wait(timeout=10)] == [("k.py", True)]
        states.until(lambda state: str(folder) not in state.folders)
        if how == "removed and made again":
            folder.mkdir()
        else:
            (tmp_path / "away").rename(folder)
        assert states.until(lambda state: str(folder) in state.folders).mode == ("polling" if polling else "inotify")
        if how == "moved away and back":  # its file is back, as it was: seen again
            assert [(s.path.name, s.removed) for s in saves.wait(timeout=10)] == [("k.py", False)]
        (folder / "add_new.py").write_text("x = 1\n")
        assert [s.path.name for s in saves.wait(timeout=10)] == ["add_new.py"]
        (folder / "add_new.py").write_text("x = 2\n")  # and the next save of it too
        assert [s.path.name for s in saves.wait(timeout=10)] == ["add_new.py"]
    finally:
        watcher.stop()


class _OutOfWatches(InotifyObserver):
    """A real inotify observer that reports what the kernel says when max_user_watches is spent."""

    def schedule(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "inotify watch limit reached")


def test_out_of_inotify_watches_falls_back_to_polling_and_says_so(folder):
    saves = Saves()
    watcher = Watcher([folder], saves, debounce_s=0.05, observer_factory=_OutOfWatches)
    state = watcher.start()
    try:
        assert state.mode == "polling"
        assert "max_user_watches" in state.reason
        # The poller's first snapshot was taken as it started; a new size is a change at any mtime.
        (folder / "k.py").write_text("v = 77\n")
        got = saves.wait()
        assert [s.path.name for s in got] == ["k.py"]
    finally:
        watcher.stop()


def test_is_watched_file_names():
    assert is_watched_file(Path("kernels/softmax_triton.py"))
    for name in ("4913", "k.py~", ".k.py.swp", "k.py___jb_tmp___", "k.py.tmp", "#k.py#", ".#k.py", "k.pyc"):
        assert not is_watched_file(Path("kernels") / name), name
    assert not is_watched_file(Path("ws/.ktui/runs/k.py"))


def test_a_file_renamed_into_place_is_saved_without_waiting_for_the_quiet_period(tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    got: list = []
    arrived = threading.Event()
    # a quiet period far longer than the wait: a save that arrives at all did not wait for it
    watcher = Watcher([folder], lambda saves: (got.extend(saves), arrived.set()), debounce_s=3 * WAIT)
    watcher.start()
    try:
        tmp = folder / ".k.py.tmp"
        tmp.write_text("v = 1\n")
        os.replace(tmp, folder / "k.py")
        assert arrived.wait(WAIT)
        assert [s.path.name for s in got] == ["k.py"]
    finally:
        watcher.stop()
