"""The workspace's daemon, from a caller's side: find it, start it, replace it, stop it.

Every command that needs a worker (``ktui run``, ``ktui mcp``, ``ktui watch``) asks ``reach``
for the workspace's owner: the one that answers on ``.ktui/owner/socket`` (the daemon, a ``ktui
serve`` in a terminal, a ``--no-daemon`` command that owns the workspace while it runs), or a
daemon started now in the background — ``python -m ktui serve ROOT --detached``, a session of its
own, its stdin closed and its output in ``.ktui/owner/daemon.log``, so a script reading a
command's output to the end never waits on it. It keeps the warm worker between calls and ends
itself when idle (``ktui.watch.service``). Callers that start together start one: the first takes
``.ktui/owner/start.lock`` while it starts the daemon, the others wait for it and connect.

A daemon of another making (``ktui.dispatch.identity``: another ktui, Python, GPU visibility or a
changed installation), or of another placement, is replaced when idle, saying so in one line;
while it runs something or a view is attached it is left alone: a caller of another making then
runs on its own (one-shot), saying why. ``KTUI_NO_DAEMON=1`` or ``--no-daemon`` keeps every run
one-shot.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ktui.dispatch.identity import differences, identity
from ktui.dispatch.owner import OwnerGone, OwnerLink, Refused, owner_folder, owner_pid
from ktui.dispatch.placement import Placement
from ktui.dispatch.proc import child_env
from ktui.protocol.owner import OwnerStatus, OwnerStopping, StopRequest

NO_DAEMON_ENV = "KTUI_NO_DAEMON"  # "1": every command runs on its own, as with --no-daemon
START_TIMEOUT_S = 120.0  # a Python start and ktui's imports on a loaded machine (no torch: the worker warms after)
LOG = "daemon.log"
READY = b"ready\n"


def wanted(no_daemon: bool = False) -> bool:
    """Whether this command goes through the workspace's daemon (not ``--no-daemon``, not
    ``KTUI_NO_DAEMON=1``)."""
    return not no_daemon and os.environ.get(NO_DAEMON_ENV, "").strip().lower() in ("", "0", "false", "no")


@dataclass
class Reached:
    """The owner to submit to (None: run one-shot) and the one line to say about it ("" for none)."""

    link: OwnerLink | None
    note: str = ""


def reach(root: Path, state: Path, placement: Placement) -> Reached:
    """The workspace's owner, starting a daemon when there is none; None (and why) when this
    command must run on its own. OSError where the workspace's state cannot be written."""
    notes: list[str] = []
    for _ in range(3):  # a daemon found stale or replaced is started again, at most twice
        link = OwnerLink.connect(state)
        if link is None:
            with _starting(state):
                link = OwnerLink.connect(state)  # another caller may have started it meanwhile
                if link is None:
                    try:
                        return Reached(start(root, state, placement), "; ".join(notes))
                    except DaemonFailed as exc:
                        return Reached(None, "; ".join([*notes, f"{exc}: running on my own"]))
        try:
            status = link.status()
        except (OwnerGone, Refused):
            continue  # it stopped meanwhile, or answered another protocol: ask again
        if not status.daemon:
            return Reached(link, "; ".join(notes))  # a command's own owner: it says if it runs elsewhere
        why = _why_replace(status, placement)
        if not why:
            return Reached(link, "; ".join(notes))
        if _busy(status):
            if placement != Placement.from_json(status.placement) and not differences(status.identity, identity()):
                return Reached(link, "; ".join(notes))  # it refuses the run, saying where it runs
            notes.append(f"the workspace's daemon (pid {status.pid}) {why}, and it is busy: running on my own")
            return Reached(None, "; ".join(notes))
        if not stop(link, f"replaced: {why}", if_idle=True).stopped:
            continue  # it became busy meanwhile: look again
        notes.append(f"replaced the workspace's daemon (pid {status.pid}): it {why}")
    return Reached(None, "; ".join([*notes, "the workspace's daemon could not be reached: running on my own"]))


def _why_replace(status: OwnerStatus, placement: Placement) -> str:
    """Why a daemon must not serve this caller ("" when it may)."""
    made = differences(status.identity, identity())
    if made:
        return f"was started by {made}"
    theirs = Placement.from_json(status.placement)
    return "" if theirs == placement else f"runs on {theirs.words()}, not {placement.words()}"


def _busy(status: OwnerStatus) -> bool:
    """A run in flight or queued, or a view attached: a daemon never replaced then."""
    return status.runs > 0 or status.views > 0


def stop(link: OwnerLink, reason: str, if_idle: bool = False) -> OwnerStopping:
    """Ask the owner to stop; once it says it stopped, its lock is released."""
    reply = link.ask(StopRequest(reason=reason, if_idle=if_idle))
    if not isinstance(reply, OwnerStopping):
        return OwnerStopping(stopped=False, message=getattr(reply, "message", reply.type))
    return reply


@contextmanager
def _starting(state: Path) -> Iterator[None]:
    """One caller at a time starts the daemon; the others wait here for it (a blocking lock the
    kernel releases with its holder, crash included)."""
    fd = os.open(owner_folder(state) / "start.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class DaemonFailed(RuntimeError):
    """The daemon did not start: its log's last lines say why."""


def start(root: Path, state: Path, placement: Placement) -> OwnerLink:
    """Start the workspace's daemon and return its link once it serves; ``DaemonFailed`` saying why not."""
    folder = owner_folder(state)
    log = os.open(folder / LOG, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    ready_r, ready_w = os.pipe()
    argv = [sys.executable, "-m", "ktui", "serve", str(root), "--detached", "--ready-fd", str(ready_w),
            "--placement", placement_json(placement)]
    try:
        proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(ready_w,),
                                start_new_session=True, env=child_env())
    finally:
        os.close(ready_w)
        os.close(log)
    threading.Thread(target=proc.wait, name="ktui-daemon-reaper", daemon=True).start()  # never a zombie of ours
    try:
        said = _read_ready(ready_r)
    finally:
        os.close(ready_r)
    if said != READY:
        how = f"no word within {START_TIMEOUT_S:.0f} s" if said is None else "it exited"
        tail = _tail(folder / LOG)
        raise DaemonFailed(f"the workspace's daemon did not start ({how})" + (f": {tail}" if tail else ""))
    link = OwnerLink.connect(state)
    if link is None:
        raise DaemonFailed(f"the workspace's daemon (pid {owner_pid(state)}) said it was ready but does not answer")
    return link


def placement_json(placement: Placement) -> str:
    return json.dumps(placement.to_json())


def _read_ready(fd: int) -> bytes | None:
    """What the daemon writes on its ready pipe: ``READY``, b"" when it exited first, None when it
    said nothing within ``START_TIMEOUT_S``."""
    ready, _, _ = select.select([fd], [], [], START_TIMEOUT_S)
    if not ready:
        return None
    return os.read(fd, 64)


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " / ".join(line.strip() for line in text[-lines:] if line.strip())
