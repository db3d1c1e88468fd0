"""Who may drive the workspace's owner: this user's processes, never a kernel under test.

The owner's socket and token are this user's alone (0600), but a mode does not stop a process of
the same user, and user code runs as the user. So the owner asks the kernel for the peer of each
connection (``SO_PEERCRED``) and refuses, in one line, a process of another user, and a process
that is a ktui worker (its environment carries a worker's token,
``ktui.protocol.processes.TOKEN_ENV``: the owner's workers, an audit's, a Ray actor's) or descends
from one: whatever user code started, even with a scrubbed environment, stays below its worker (the
worker is a subreaper), and what left the tree with its worker's death still carries the token.
The token file (``.ktui/owner/token``) is the other lock: the worker's sandbox does not let user
code read ``.ktui/`` beyond its run folder. Linux only; elsewhere every peer is admitted.
"""

from __future__ import annotations

import os
import socket
import struct

from ktui.protocol.processes import TOKEN_ENV

UCRED = struct.Struct("3i")  # pid, uid, gid


def peer(conn: socket.socket) -> tuple[int, int] | None:
    """The connecting process's pid and uid, or None where the system does not say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid, uid, _ = UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, option, UCRED.size))
    except OSError:
        return None
    return pid, uid


def refused(conn: socket.socket) -> str:
    """Why the process at the other end of ``conn`` may not drive this owner ("" when it may)."""
    found = peer(conn)
    if found is None:
        return ""
    pid, uid = found
    if uid != os.getuid():
        return f"refused: pid {pid} is another user's (uid {uid})"
    worker = next((p for p in _lineage(pid) if _carries_worker_token(p)), None)
    if worker is not None:
        return f"refused: pid {pid} runs inside a ktui worker (pid {worker}): user code under test may not submit work"
    return ""


def _lineage(pid: int) -> list[int]:
    """``pid`` and its ancestors, up to (not including) init."""
    found: list[int] = []
    while pid > 1 and pid not in found:
        found.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return found


def _carries_worker_token(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            names = [entry.split(b"=", 1)[0] for entry in f.read().split(b"\0")]
    except OSError:
        return False
    return TOKEN_ENV.encode() in names
