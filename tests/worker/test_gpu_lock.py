"""Timed sections of different ktui processes take turns on a GPU, and other GPU work keeps out of
their way (``ktui.worker.timing.gpu_lock``): real processes, real ``flock``, and a worker confined by
Landlock that still takes its turn."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO

from ktui.worker.timing import gpu_lock

pytestmark = pytest.mark.worker

HOLDER = """
import sys, time
from pathlib import Path
from ktui.worker.timing import gpu_lock
print("asking", flush=True)
turn = getattr(gpu_lock, sys.argv[4])(sys.argv[1], directory=Path(sys.argv[2]) if sys.argv[2] else None)
print("held" if turn.held else "not held", flush=True)
time.sleep(float(sys.argv[3]))
turn.release()
"""


def start(key: str, seconds: float, directory: str = "", how: str = "take") -> subprocess.Popen:
    """Another process that asks for its turn on ``key`` (``take``: timed, ``share``: other work),
    returned once it asks; it prints ``held`` once it has it, and keeps it for ``seconds``."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, key, directory, str(seconds), how], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "asking"
    return proc


def hold(key: str, seconds: float, directory: str = "", how: str = "take") -> subprocess.Popen:
    """``start``, returning once the other process holds its turn."""
    proc = start(key, seconds, directory, how)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_section_waits_for_another_process_timing_on_the_same_gpu(tmp_path):
    holder = hold("GPU-waits", 1.0, str(tmp_path))
    try:
        with gpu_lock.take("GPU-waits", directory=tmp_path) as turn:
            assert turn.held
        assert 0.5 <= turn.waited_s <= 5.0
        assert turn.figures() == {"gpu_wait_s": round(turn.waited_s, 3)}
    finally:
        holder.wait(10)


def test_another_gpu_is_not_waited_for(tmp_path):
    holder = hold("GPU-one", 5.0, str(tmp_path))
    try:
        with gpu_lock.take("GPU-two", directory=tmp_path) as turn:
            assert turn.held and turn.waited_s < 0.5 and turn.figures() == {}
    finally:
        holder.kill()
        holder.wait(10)


def test_a_lock_kept_past_the_wait_is_timed_anyway_and_says_so(tmp_path):
    holder = hold("GPU-kept", 30.0, str(tmp_path))
    try:
        with gpu_lock.take("GPU-kept", wait_s=0.3, directory=tmp_path) as turn:
            assert not turn.held
        assert 0.3 <= turn.waited_s < 3.0
        assert "another ktui process was using this GPU" in turn.figures()["gpu_lock"]
    finally:
        holder.kill()
        holder.wait(10)


def test_a_holder_that_dies_hands_the_gpu_on(tmp_path):
    holder = hold("GPU-dies", 60.0, str(tmp_path))
    holder.kill()
    holder.wait(10)
    with gpu_lock.take("GPU-dies", wait_s=5.0, directory=tmp_path) as turn:
        assert turn.held and turn.waited_s < 1.0


def test_other_gpu_work_waits_for_a_timed_section_then_runs(tmp_path):
    holder = hold("GPU-shared", 1.0, str(tmp_path))
    try:
        turn = gpu_lock.share("GPU-shared", directory=tmp_path)
        assert turn.held and 0.5 <= turn.waited_s <= 5.0
        turn.release()
    finally:
        holder.wait(10)


def test_other_gpu_work_runs_beside_other_gpu_work(tmp_path):
    holder = hold("GPU-many", 5.0, str(tmp_path), how="share")
    try:
        turn = gpu_lock.share("GPU-many", directory=tmp_path)
        assert turn.held and turn.waited_s < 0.5
        turn.release()
    finally:
        holder.kill()
        holder.wait(10)


def test_a_timed_section_waits_for_other_gpu_work_to_finish(tmp_path):
    holder = hold("GPU-busy", 1.0, str(tmp_path), how="share")
    try:
        with gpu_lock.take("GPU-busy", directory=tmp_path) as turn:
            assert turn.held and 0.5 <= turn.waited_s <= 5.0
    finally:
        holder.wait(10)


def test_a_waiting_timed_section_holds_back_new_gpu_work(tmp_path):
    # Without the gate, users that keep overlapping would keep a timed section waiting for ever:
    # work that comes after a timed section began to wait runs after it.
    first = hold("GPU-gate", 1.5, str(tmp_path), how="share")
    timed = start("GPU-gate", 1.0, str(tmp_path), how="take")
    try:
        wait_until_closed(tmp_path / "GPU-gate.gate")  # the timed section waits for the first user's turn
        turn = gpu_lock.share("GPU-gate", directory=tmp_path)
        # It passed the gate only once the timed section had had its second: the first user alone
        # would have let it in at once.
        assert turn.held and turn.waited_s >= 0.9
        turn.release()
    finally:
        first.wait(10)
        timed.wait(10)


def wait_until_closed(gate: Path, limit_s: float = 30.0) -> None:
    """Until another process holds ``gate`` exclusively (a shared lock on it is refused)."""
    fd = os.open(gate, os.O_RDONLY)
    try:
        deadline = time.monotonic() + limit_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                return
            assert time.monotonic() < deadline, "the timed section never took the gate"
            time.sleep(0.01)
    finally:
        os.close(fd)


def test_other_gpu_work_kept_out_past_its_wait_runs_and_says_so(tmp_path):
    holder = hold("GPU-long", 30.0, str(tmp_path))
    try:
        turn = gpu_lock.share("GPU-long", wait_s=0.3, directory=tmp_path)
        assert not turn.held and 0.3 <= turn.waited_s < 3.0
        assert "another ktui process was timing on this GPU" in turn.figures()["gpu_lock"]
    finally:
        holder.kill()
        holder.wait(10)


def test_a_hostile_device_name_stays_one_file_inside_the_lock_folder(tmp_path):
    with gpu_lock.take("../../etc/passwd\n", directory=tmp_path / "locks") as turn:
        assert turn.held
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == [".._.._etc_passwd_.gate", ".._.._etc_passwd_.lock"]
    assert not (tmp_path / "etc").exists()


def test_a_link_planted_in_the_shared_folder_is_never_followed(tmp_path):
    # The folder is every user's: a link there must not make ktui open (or chmod) what it points at.
    victim = tmp_path / "victim"
    victim.write_text("mine")
    victim.chmod(0o600)
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "GPU-linked.lock").symlink_to(victim)
    with gpu_lock.take("GPU-linked", directory=locks) as turn:
        assert not turn.held and "could not be used" in turn.figures()["gpu_lock"]
    assert victim.stat().st_mode & 0o777 == 0o600 and victim.read_text() == "mine"
    (tmp_path / "folder").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    with gpu_lock.take("GPU-x", directory=tmp_path / "folder") as turn:
        assert not turn.held and "could not be used" in turn.figures()["gpu_lock"]
    assert (tmp_path / "elsewhere").stat().st_mode & 0o777 == 0o700 and not list((tmp_path / "elsewhere").iterdir())


def test_a_confined_worker_still_takes_its_turn_in_the_shared_folder(tmp_path):
    # The default folder is beneath /dev (/dev/shm), which Landlock leaves writable for CUDA;
    # elsewhere a confined worker could not create the lock file.
    from ktui.worker.confine import landlock_abi
    try:
        if landlock_abi() < 1:
            pytest.skip("this kernel has no Landlock")
    except OSError:
        pytest.skip("this kernel has no Landlock")
    key = f"GPU-test-{uuid.uuid4()}"
    probe = textwrap.dedent("""
        import sys
        from pathlib import Path
        from ktui.worker.confine import confine
        from ktui.worker.timing import gpu_lock
        c = confine([Path(sys.argv[2])])
        with gpu_lock.take(sys.argv[1]) as turn:
            print(c.confined, turn.held, repr(turn.note))
    """)
    holder = hold(key, 0.5)
    try:
        started = time.monotonic()
        out = subprocess.run([sys.executable, "-c", probe, key, str(tmp_path)], cwd=REPO, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True", "True", "''"]
        assert time.monotonic() - started >= 0.3  # it waited for the holder: both used one file
    finally:
        holder.wait(10)
        for kind in ("lock", "gate"):
            (gpu_lock.lock_dir() / f"{key}.{kind}").unlink(missing_ok=True)


def test_a_turn_ends_with_its_block_even_when_the_block_raises(tmp_path):
    with pytest.raises(RuntimeError, match="the section failed"), gpu_lock.share("GPU-block", directory=tmp_path) as turn:
        assert turn.held
        raise RuntimeError("the section failed")
    with gpu_lock.take("GPU-block", wait_s=0.3, directory=tmp_path) as again:  # nothing is held any more
        assert again.held and again.waited_s < 0.3
