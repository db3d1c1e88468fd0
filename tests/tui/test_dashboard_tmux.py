"""The real ``ktui watch`` in a real terminal (tmux), while vim and an agent-style rename edit files.

tmux gives the app a real pty and keys as a terminal sends them (send-keys) and shows what a
person would see (capture-pane). CI installs tmux (see .ci/run); without it the test says so.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO, make_workspace
from waits import SAFETY_S

TMUX = shutil.which("tmux")
VIM = shutil.which("vim")
pytestmark = [
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed (apt-get install -y tmux; .ci/run does)"),
    pytest.mark.e2e,
]

ADD = (REPO / "kernels" / "add_triton.py").read_text()


class Tmux:
    """One private tmux server (its own socket) so no other session is touched."""

    def __init__(self, socket: str):
        self.socket = socket

    def __call__(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        if check and proc.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    def screen(self, target: str = "app") -> str:
        return self("capture-pane", "-p", "-t", target)

    def wait_for(self, predicate, timeout: float = SAFETY_S, target: str = "app", what: str = "") -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen(target)
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen shows:\n{text}")
            time.sleep(0.2)


def _finished_runs(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db, timeout=30) as conn:
        return conn.execute("SELECT COUNT(*) FROM runs WHERE verdict NOT IN ('running', 'cancelled')").fetchone()[0]


def line_of(screen: str, kernel: str) -> str:
    return next((l for l in screen.splitlines() if f" {kernel} " in l), "")


def test_the_real_app_in_tmux_follows_edits_by_vim_and_by_rename_and_quits_on_q(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["compile_error"])
    tmux = Tmux(f"ktui-test-{uuid.uuid4().hex[:8]}")
    done = tmp_path / "exited"
    command = (f"cd {shlex.quote(str(ws))} && PYTHONPATH={shlex.quote(str(REPO))} {shlex.quote(sys.executable)} "
               f"-m ktui watch . --seed 0 --debounce-ms 100; echo $? > {shlex.quote(str(done))}")
    tmux("new-session", "-d", "-s", "app", "-x", "100", "-y", "30", command)
    try:
        screen = tmux.wait_for(lambda s: "✗ failed" in line_of(s, "compile_error") and "✓ passed" in line_of(s, "add_triton"),
                               what="the first runs")
        assert "CPU · Triton interpreter · sm_90a" in screen and "watch: inotify" in screen

        # vim, the real editor, fixes the kernel: 4913 probe, backup, write, rename — one save.
        kernel = ws / "kernels" / "compile_error.py"
        if VIM:
            tmux("new-window", "-d", "-n", "vim",
                 f"{VIM} -u NONE -N -n -c 'set backup writebackup backupcopy=no' "
                 f"-c '%s/tl.arange(0, 1000)/tl.arange(0, BLOCK)/' -c 'wq' {shlex.quote(str(kernel))}")
        else:  # the same steps vim takes, by hand
            (kernel.parent / "4913").write_text("")
            (kernel.parent / "4913").unlink()
            os.rename(kernel, kernel.with_name(kernel.name + "~"))
            kernel.write_text(kernel.with_name(kernel.name + "~").read_text().replace("tl.arange(0, 1000)", "tl.arange(0, BLOCK)"))
        screen = tmux.wait_for(lambda s: "✓ passed" in line_of(s, "compile_error") and "v2" in line_of(s, "compile_error"),
                               what="the fixed kernel's run")
        assert "compiled cleanly for sm_90a" in screen  # follow mode selected it; the compile tab shows it

        # an agent's save: temp file + os.replace
        tmp = ws / "kernels" / ".add_triton.py.tmp"
        tmp.write_text(ADD.replace("block = 1024", "block = 256"))
        os.replace(tmp, ws / "kernels" / "add_triton.py")
        tmux.wait_for(lambda s: "v2" in line_of(s, "add_triton") and "✓ passed" in line_of(s, "add_triton"),
                      what="the agent's save")

        # keys as a terminal sends them: R (shift+r) re-runs both kernels
        db = ws / ".ktui" / "history.db"
        before = _finished_runs(db)
        tmux("send-keys", "-t", "app", "R")
        deadline = time.monotonic() + SAFETY_S
        while _finished_runs(db) < before + 2 and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _finished_runs(db) == before + 2
        tmux("send-keys", "-t", "app", "2")
        tmux.wait_for(lambda s: "figures / message" in s, what="the rungs tab")
        tmux("send-keys", "-t", "app", "?")
        tmux.wait_for(lambda s: "ktui watch — keys" in s, what="the help")
        tmux("send-keys", "-t", "app", "Escape")
        tmux.wait_for(lambda s: "ktui watch — keys" not in s, what="the help to close")
        tmux("send-keys", "-t", "app", "q")
        deadline = time.monotonic() + SAFETY_S
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert done.exists() and done.read_text().strip() == "0"
    finally:
        tmux("kill-server", check=False)


def test_e_opens_the_failing_line_in_the_editor_in_a_tmux_split(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["compile_error"])
    opened = tmp_path / "opened"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\necho "$@" > {shlex.quote(str(opened))}\n')
    editor.chmod(0o755)
    tmux = Tmux(f"ktui-test-{uuid.uuid4().hex[:8]}")
    command = (f"cd {shlex.quote(str(ws))} && EDITOR={shlex.quote(str(editor))} PYTHONPATH={shlex.quote(str(REPO))} "
               f"{shlex.quote(sys.executable)} -m ktui watch . --seed 0")
    tmux("new-session", "-d", "-s", "app", "-x", "100", "-y", "30", command)
    try:
        tmux.wait_for(lambda s: "✗ failed" in line_of(s, "compile_error"), what="the failing run")
        tmux("send-keys", "-t", "app", "e")
        deadline = time.monotonic() + SAFETY_S
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert opened.read_text().split() == ["+11", str(ws / "kernels" / "compile_error.py")]
        assert "✗ failed" in line_of(tmux.screen("app:0.0"), "compile_error")  # the dashboard is still there
    finally:
        tmux("kill-server", check=False)


HOSTILE_NAME = "add_\x1b]2;HIJACKED\x07\x1b[2J\x1b[31m.py"  # sets the window title, clears the screen, turns red
CLIPBOARD = "\x1b]52;c;UFdORUQ=\x07"  # OSC 52: writes "PWNED" to the clipboard


def test_escapes_in_a_file_name_and_in_what_a_kernel_prints_are_shown_not_obeyed_by_the_dashboard(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / HOSTILE_NAME).write_text(ADD + f"\nprint({CLIPBOARD + 'after the clipboard'!r})\n")
    tmux = Tmux(f"ktui-test-{uuid.uuid4().hex[:8]}")
    command = (f"cd {shlex.quote(str(ws))} && PYTHONPATH={shlex.quote(str(REPO))} {shlex.quote(sys.executable)} "
               f"-m ktui watch . --seed 0 --no-bench")
    tmux("new-session", "-d", "-s", "app", "-x", "120", "-y", "30", command)
    tmux("set-option", "-g", "set-clipboard", "on")  # tmux keeps an application's OSC 52 as a paste buffer
    try:
        screen = tmux.wait_for(lambda s: "✓ passed" in s and "6 output" in s, what="the hostile kernel's run")
        assert "add_\\x1b]2;HIJACKED\\x07" in screen, screen  # the name, its escapes written out
        tmux("send-keys", "-t", "app", "6")
        screen = tmux.wait_for(lambda s: "after the clipboard" in s, what="the output pane")
        assert "\\x1b]52;c;UFdORUQ=\\x07after the clipboard" in screen
        assert "HIJACKED" not in tmux("display-message", "-p", "-t", "app", "#{pane_title}")
        assert tmux("list-buffers") == ""  # nothing reached the clipboard
        styles = tmux("capture-pane", "-p", "-e", "-t", "app")
        assert "\x1b[31m" not in styles.split("HIJACKED", 1)[1].split("\n", 1)[0]  # the name did not turn red
    finally:
        tmux("kill-server", check=False)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP"])
def test_a_dashboard_stopped_by_a_signal_records_its_run_in_flight_cancelled(tmp_path, how):
    import signal
    import sqlite3

    ws = make_workspace(tmp_path / "ws", fixtures=["hang"])
    tmux = Tmux(f"ktui-test-{uuid.uuid4().hex[:8]}")
    command = (f"cd {shlex.quote(str(ws))} && PYTHONPATH={shlex.quote(str(REPO))} exec {shlex.quote(sys.executable)} "
               f"-m ktui watch . --seed 0 --no-bench --no-audit")
    tmux("new-session", "-d", "-s", "app", "-x", "120", "-y", "30", command)
    try:
        pid = int(tmux("display-message", "-p", "-t", "app", "#{pane_pid}").strip())
        db = ws / ".ktui" / "history.db"
        deadline = time.monotonic() + SAFETY_S
        while time.monotonic() < deadline and not _runs_with(db, "running"):
            time.sleep(0.3)
        assert _runs_with(db, "running"), "hang's run never started"
        time.sleep(2.0)
        if how == "SIGTERM":
            os.kill(pid, signal.SIGTERM)
        else:
            tmux("kill-session", "-t", "app")  # the terminal goes away: SIGHUP
        deadline = time.monotonic() + SAFETY_S
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists(), "the dashboard outlived its signal"
    finally:
        tmux("kill-server", check=False)
    with sqlite3.connect(ws / ".ktui" / "history.db") as conn:
        rows = conn.execute("SELECT verdict, message FROM runs").fetchall()
    assert rows == [("cancelled", f"cancelled: stopped by {how}: the dashboard is stopping")]


def _runs_with(db: Path, verdict: str) -> int:
    import sqlite3

    if not db.exists():
        return 0
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return conn.execute("SELECT COUNT(*) FROM runs WHERE verdict=?", (verdict,)).fetchone()[0]
        except sqlite3.OperationalError:  # the tables are not made yet
            return 0


def test_e_in_the_hot_lines_opens_the_hottest_line_in_the_editor(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_triton"])
    opened = tmp_path / "opened"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\necho "$@" > {shlex.quote(str(opened))}\n')
    editor.chmod(0o755)
    tmux = Tmux(f"ktui-test-{uuid.uuid4().hex[:8]}")
    command = (f"cd {shlex.quote(str(ws))} && EDITOR={shlex.quote(str(editor))} PYTHONPATH={shlex.quote(str(REPO))} "
               f"{shlex.quote(sys.executable)} -m ktui watch . --seed 0")
    tmux("new-session", "-d", "-s", "app", "-x", "160", "-y", "48", command)
    try:
        tmux.wait_for(lambda s: "✓ passed" in line_of(s, "softmax_triton"), what="the passing run")
        tmux("send-keys", "-t", "app", "h")
        tmux.wait_for(lambda s: "hot lines · softmax_triton.py v1" in s, what="the hot lines")
        tmux("send-keys", "-t", "app", "e")
        deadline = time.monotonic() + SAFETY_S
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        data = json.loads((ws / ".ktui" / "runs" / "softmax_triton" / "1" / "hotspots.json").read_text())
        (fn,) = data["functions"]
        hottest = max(fn["lines"], key=lambda x: x["total"])["line"]
        assert opened.read_text().split() == [f"+{hottest}", str(ws / "kernels" / "softmax_triton.py")]
    finally:
        tmux("kill-server", check=False)
