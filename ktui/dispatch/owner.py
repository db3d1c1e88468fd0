"""One owner of a workspace's GPUs: the process that holds its lock runs every job, others submit.

The owner (``ktui serve``, ``ktui watch``, or any ``ktui run`` that found none) holds an
exclusive ``fcntl.flock`` on ``.ktui/owner/lock`` for its lifetime — the kernel releases it when
the process ends, crash included — and serves its run queue on the Unix socket
``.ktui/owner/socket`` (folder 0700, socket 0600: only this user's processes may submit). A
caller sends one request (kernel paths, its ``Options``, the placement it asks for) and reads the
runs' events back as JSON lines, then ``owner_done``. So runs never overlap on one GPU and every
caller gets the owner's warm worker. A socket left by a crashed owner is found stale (nobody holds
the lock) and replaced by the next owner. The owner runs each accepted job to its end, even when
its caller goes away.

A caller may also follow one kernel (``{"follow": path}``): the owner answers ``owner_following``
lines — whether a run of it is queued or in flight (``busy``), and, for an owner that watches the
files, within how many seconds it picks up a save (``save_grace_s``) — once at once and again at
each change, until the caller hangs up. The MCP ``verdict`` tool waits on it (``ktui.agents.verdicts``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Iterator

from ktui.dispatch.queue import RunQueue
from ktui.protocol.events import Event, event_from_json
from ktui.protocol.job import Options
from ktui.protocol.notices import QueueChanged
from ktui.protocol.sourcelines import PARSING
from ktui.workspace.kernels import ProblemError, discover, find_root, state_dir

FOLDER = "owner"
HERE = "this machine"  # placement_words() with no flags: a worker of this machine, its default tier
DONE = "owner_done"
TURN = "owner_turn"
# Set for a command started inside a turn the queue already gave (the dashboard's profile task):
# it must not ask for another, which would wait behind itself.
TURN_HELD_ENV = "KTUI_GPU_TURN_HELD"  # the caller's turn on the GPU has come: it says "release" (or hangs up) when done
ERROR = "owner_error"
FOLLOWING = "owner_following"


class OwnerGone(RuntimeError):
    """The owner stopped (killed, crashed) before it answered every run of a request."""


def placement_words(remote: str | None = None, gpus: str | None = None, cpu: bool = False, cold: bool = False,
                    ray: str | None = None) -> str:
    """Where a command's runs happen, in words: what a caller asks of the owner, which refuses, in
    one line, a placement it does not have."""
    where = f"Ray {ray}" if ray else f"remote {remote}" if remote else (f"GPUs {gpus}" if gpus else HERE)
    return where + (" (CPU tier)" if cpu else "") + (" (a fresh worker per kernel)" if cold else "")


def owner_folder(state: Path) -> Path:
    folder = Path(state) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


class Ownership:
    """The workspace's lock, held (``take``) for as long as this process owns its GPUs."""

    def __init__(self, fd: int, folder: Path):
        self._fd = fd
        self.folder = folder

    @classmethod
    def take(cls, state: Path) -> Ownership | None:
        """The lock, or None when another process owns the workspace (or its state cannot be
        written: a read-only workspace has no owner, each command runs on its own)."""
        try:
            folder = owner_folder(state)
            fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())  # for callers' messages only
        except OSError:
            pass  # a full disk: the lock holds all the same
        return cls(fd, folder)

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


@contextmanager
def gpu_turn(state: Path, label: str) -> Iterator[None]:
    """Run the body in its turn on the owner's GPU when the workspace has an owner (a profile or
    an audit never overlaps the owner's runs); with none, at once."""
    link = None if os.environ.get(TURN_HELD_ENV) else OwnerLink.connect(state)
    if link is None:
        yield
        return
    with link.turn(label):
        yield


def gpu_turn_for(path: Path | None, label: str):
    """``gpu_turn`` in the workspace of ``path`` (a kernel, a reference, a folder; None: this
    folder's), or nothing to wait for where there is no workspace."""
    try:
        root = find_root(Path(path) if path is not None else Path.cwd(), fallback=Path.cwd())
    except ProblemError:
        return nullcontext()
    return gpu_turn(state_dir(root), label)


def owner_pid(state: Path) -> str:
    try:
        return (Path(state) / FOLDER / "lock").read_text().strip() or "?"
    except OSError:
        return "?"


class OwnerServer:
    """This process's ownership of a workspace (its lock, held from ``claim`` to ``close``), and its
    run queue served to other processes of this user on the workspace's socket."""

    def __init__(self, ownership: Ownership, placement: str = HERE, save_grace_s: float | None = None):
        self.ownership = ownership
        self.queue: RunQueue | None = None  # set by ``serve``
        self.placement = placement
        self.save_grace_s = save_grace_s  # a watch: a save is queued within this many seconds; None: saves run nothing
        self.path = ownership.folder / "socket"
        self._sock: socket.socket | None = None
        self._closing = False

    @classmethod
    def claim(cls, state: Path, queue: RunQueue | None = None, placement: str = HERE,
              save_grace_s: float | None = None) -> OwnerServer | None:
        """Take the workspace's ownership and serve ``queue`` to other processes: the server, or None
        when another process owns the workspace (or its state cannot be written: a read-only
        workspace has no owner, each command runs on its own). Where the socket cannot be made (a
        full disk) the server still holds the lock and serves nobody: the owner then runs only its
        own work. With no ``queue`` the lock is taken now and ``serve`` gives the queue later (an
        owner that refuses to start while another owns the workspace, before it makes its workers)."""
        ownership = Ownership.take(state)
        if ownership is None:
            return None
        server = cls(ownership, placement, save_grace_s)
        if queue is not None:
            try:
                server.serve(queue)
            except OSError:
                pass  # the lock holds all the same
        return server

    def serve(self, queue: RunQueue) -> None:
        """Listen on the workspace's socket for callers of ``queue``; OSError where it cannot be made."""
        self.queue = queue
        try:
            self.path.unlink()  # we hold the lock: a socket there is a crashed owner's
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            old = os.umask(0o177)
            try:
                sock.bind(str(self.path))
            finally:
                os.umask(old)
            os.chmod(self.path, 0o600)
            sock.listen(16)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        threading.Thread(target=self._accept, args=(sock,), name="ktui-owner", daemon=True).start()

    def _accept(self, sock: socket.socket) -> None:
        while not self._closing:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="ktui-owner-call", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            stream = conn.makefile("rw", encoding="utf-8")
            try:
                self._answer(conn, stream)
            finally:
                with contextlib.suppress(OSError):  # a caller gone with an answer unsent: nothing to flush to
                    stream.close()

    def _answer(self, conn: socket.socket, stream) -> None:
        lock = threading.Lock()

        def send(item: dict[str, Any]) -> None:
            with lock:
                try:
                    stream.write(json.dumps(item, default=str) + "\n")
                    stream.flush()
                except OSError:
                    pass  # the caller went away: its runs go on to their end all the same

        try:
            line = stream.readline()
            if not line:
                return  # the caller hung up before it asked for anything
            request = json.loads(line)
            if "turn" in request:
                self._turn(str(request["turn"]), stream, send)
                return
            if "follow" in request:
                self._follow(Path(request["follow"]), conn, send)
                return
            asked = request.get("placement", HERE)
            if asked != self.placement:
                send({"type": ERROR, "message": f"the owner of this workspace (pid {os.getpid()}) runs on "
                                                f"{self.placement}, not {asked}: stop it or ask for {self.placement}"})
                return
            with PARSING:  # CPython 3.11's parser is not safe in two threads at once
                kernels = discover([Path(p) for p in request["paths"]],
                                   reference=Path(request["reference"]) if request.get("reference") else None)
            options = Options(**request.get("options", {}))
            for _ in self.queue.batch(kernels, options, again=bool(request.get("again")),
                                      heard=lambda event: send(json.loads(event.dumps()))):
                pass
            send({"type": DONE})
        except (ProblemError, ValueError, KeyError, TypeError) as exc:
            send({"type": ERROR, "message": str(exc)})
        except Exception as exc:  # a run that could not happen (no worker): the caller says why
            send({"type": ERROR, "message": f"{type(exc).__name__}: {exc}"})

    def _turn(self, label: str, stream, send) -> None:
        """A caller's own process (a profile, an audit) gets the first GPU in its turn and keeps it
        until it says ``release`` or hangs up: it never shares the GPU with a run of the queue."""
        ended = threading.Event()

        def work(cancel: threading.Event) -> None:
            try:
                send({"type": TURN})
                stream.readline()  # "release", or "" when the caller is gone
            finally:
                ended.set()

        self.queue.submit_turn(label, work)
        ended.wait()

    def _follow(self, path: Path, conn: socket.socket, send) -> None:
        """Whether a run of the kernel at ``path`` is queued or in flight, now and at each change,
        until the caller hangs up."""
        told: list[bool] = []
        lock = threading.Lock()

        def tell(item=None) -> None:
            if item is not None and not isinstance(item, QueueChanged):
                return
            with lock:
                busy = self.queue.busy(path)
                if not told or told[-1] != busy:
                    told.append(busy)
                    send({"type": FOLLOWING, "busy": busy, "save_grace_s": self.save_grace_s})

        self.queue.follow(tell)
        try:
            tell()
            while conn.recv(4096):  # nothing to read: b"" when the caller hangs up
                pass
        except OSError:
            pass
        finally:
            self.queue.unfollow(tell)

    def stop_accepting(self) -> None:
        """No more callers; those accepted are served to the end (their runs are the queue's). The
        workspace stays owned until ``close``."""
        self._closing = True
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.close()
        finally:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass

    def close(self) -> None:
        """Stop accepting callers and give the workspace's ownership back; again, nothing."""
        try:
            self.stop_accepting()
        finally:
            self.ownership.release()


class OwnerLink:
    """A caller's side: the workspace's owner, reached through its socket."""

    def __init__(self, sock: socket.socket, pid: str):
        self._sock = sock
        self.pid = pid

    def close(self) -> None:
        """Stop reading (the caller gave up); the owner runs what it accepted to its end."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    @classmethod
    def connect(cls, state: Path) -> OwnerLink | None:
        """The owner, or None when there is none (no socket, or one a crashed owner left)."""
        path = Path(state) / FOLDER / "socket"
        if not path.exists():
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            return None
        return cls(sock, owner_pid(state))

    @contextmanager
    def turn(self, label: str) -> Iterator[None]:
        """Hold the owner's first GPU while the body runs (it waits for the runs ahead of it)."""
        with self._sock, self._sock.makefile("rw", encoding="utf-8") as stream:
            stream.write(json.dumps({"turn": label}) + "\n")
            stream.flush()
            line = stream.readline()
            if not line or json.loads(line).get("type") != TURN:
                raise OwnerGone(f"the owner of this workspace (pid {self.pid}) stopped before giving {label} its turn")
            try:
                yield
            finally:
                try:
                    stream.write("release\n")
                    stream.flush()
                except OSError:
                    pass

    def run(self, paths: list[Path], options: Options, placement: str = HERE, reference: Path | None = None,
            again: bool = False) -> Iterator[Event]:
        """The events of the owner's runs of ``paths``; ``OwnerGone`` when it stops before answering
        them all, ``RuntimeError`` with its one line when it refuses the request."""
        request = {"paths": [str(Path(p).resolve()) for p in paths], "options": dataclasses.asdict(options),
                   "placement": placement, "reference": str(reference.resolve()) if reference else None,
                   "again": again}
        with self._sock, self._sock.makefile("rw", encoding="utf-8") as stream:
            stream.write(json.dumps(request) + "\n")
            stream.flush()
            for line in stream:
                item = json.loads(line)
                if item["type"] == DONE:
                    return
                if item["type"] == ERROR:
                    raise RuntimeError(item["message"])
                yield event_from_json(item)
        raise OwnerGone(f"the owner of this workspace (pid {self.pid}) stopped before its runs finished: "
                        "run the command again (it becomes the owner if none is left)")

    def follow(self, path: Path) -> Following:
        """Follow the kernel at ``path`` in the owner's queue (``Following.next``)."""
        self._sock.sendall((json.dumps({"follow": str(Path(path).resolve())}) + "\n").encode())
        return Following(self._sock, self.pid)


class Following:
    """What the owner says of one followed kernel, a line at a time, each read bounded in time."""

    def __init__(self, sock: socket.socket, pid: str):
        self._sock = sock
        self.pid = pid
        self._buffer = b""

    def next(self, timeout_s: float) -> dict[str, Any] | None:
        """The owner's next ``owner_following`` line, or None when none came within ``timeout_s``;
        ``OwnerGone`` when the owner stopped, ``RuntimeError`` when it refused (an older owner)."""
        while b"\n" not in self._buffer:
            self._sock.settimeout(max(timeout_s, 0.001))
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                return None
            except OSError as exc:
                raise OwnerGone(f"the owner of this workspace (pid {self.pid}) went away: {exc}") from None
            if not data:
                raise OwnerGone(f"the owner of this workspace (pid {self.pid}) stopped")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        item = json.loads(line)
        if item.get("type") == ERROR:
            raise RuntimeError(item.get("message", "the owner refused"))
        return item

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
