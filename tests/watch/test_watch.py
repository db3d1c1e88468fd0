"""The watcher: editors' and agents' ways of saving become exactly one save of the real file."""

from __future__ import annotations

import errno
import os
import queue
import threading
import time
from pathlib import Path

import pytest
from watchdog.observers.inotify import InotifyObserver

from ktui.watch.watcher import Save, Watcher, is_watched_file

pytestmark = pytest.mark.unit

QUIET = 0.6  # long enough for the debounce (50 ms here) and inotify delivery on a busy machine


class Saves:
    """Collects saves from the watcher thread; ``wait`` returns those of one burst."""

    def __init__(self):
        self.q: queue.Queue[Save] = queue.Queue()

    def __call__(self, saves: list[Save]) -> None:
        for s in saves:
            self.q.put(s)

    def wait(self, timeout: float = 5.0, quiet: float = QUIET) -> list[Save]:
        got = [self.q.get(timeout=timeout)]
        while True:
            try:
                got.append(self.q.get(timeout=quiet))
            except queue.Empty:
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
    watcher = Watcher([folder], saves, debounce_s=0.05)
    watcher.start()
    yield folder, saves, watcher
    watcher.stop()


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
    assert saves.none(within=QUIET * 2)


def test_a_burst_of_writes_settles_into_one_save_of_the_final_content(watched):
    folder, saves, watcher = watched
    for i in range(30):
        (folder / "k.py").write_text(f"v = {i + 10}\n")
        time.sleep(0.005)
    got = saves.wait()
    assert len(got) == 1
    assert got[0].content_hash == watcher.known_hash(folder / "k.py")
    from ktui.workspace.kernels import content_hash

    assert got[0].content_hash == content_hash(b"v = 39\n")


def test_a_file_held_open_mid_write_is_saved_once_its_writer_closes_it_never_half_written(watched):
    folder, saves, watcher = watched
    with open(folder / "k.py", "w") as f:  # truncated now, like every write in place
        f.write("v = 1\n# half")
        f.flush()
        # far longer than the 50 ms quiet period: a busy machine's pause between truncate and write
        assert saves.none(within=QUIET * 2)
        f.write(" and whole\n")
    got = saves.wait()
    from ktui.workspace.kernels import content_hash

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
    assert saves.none(within=QUIET * 2)


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
        time.sleep(0.3)
        (tmp_path / "kernels" / "add_new.py").write_text("x = 1\n")
        got = saves.wait()
        assert [s.path.name for s in got] == ["add_new.py"]
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
        time.sleep(1.2)  # the poller's first snapshot
        (folder / "k.py").write_text("v = 7\n")
        got = saves.wait(timeout=8)
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
    watcher = Watcher([folder], lambda saves: (got.extend(saves), arrived.set()), debounce_s=2.0)
    watcher.start()
    try:
        tmp = folder / ".k.py.tmp"
        tmp.write_text("v = 1\n")
        started = time.monotonic()
        os.replace(tmp, folder / "k.py")
        assert arrived.wait(10)
        # well before the 2 s quiet period a write in place waits for
        assert time.monotonic() - started < 1.0  # behaviour, not speed: at once rather than after 2 s
        assert [s.path.name for s in got] == ["k.py"]
    finally:
        watcher.stop()
