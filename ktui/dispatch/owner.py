"""One owner of a workspace's GPUs: the process that holds its lock runs every job, others submit.

The owner (the workspace's daemon, ``ktui serve``, a ``ktui watch --no-daemon`` or a one-shot
``ktui run`` that found none) holds an exclusive ``fcntl.flock`` on ``.ktui/owner/lock`` for its
lifetime — the kernel releases it when the process ends, crash included — and serves its run queue
on the Unix socket ``.ktui/owner/socket`` (folder 0700, socket and files 0600: only this user's
processes may connect). A caller sends one request (``ktui.protocol.owner``: its kernels, its
``Options``, the ``Placement`` it asks for) and reads back the events of its own runs only, then
``owner_done``. So runs never overlap on one GPU and every caller gets the owner's warm worker.
A socket left by a crashed owner is found stale (nobody holds the lock) and replaced by the next
owner. The owner runs each accepted job to its end, even when its caller goes away, unless the
caller cancels it (``cancel_request``: ``ktui run`` stopped by a signal, an MCP call cancelled).

Each request carries the workspace's token (``.ktui/owner/token``, written by the owner when it
claims the workspace): a file the worker's sandbox cannot read, so a kernel under test cannot
submit work; ``ktui.dispatch.peers`` also refuses any process descended from the owner's workers.

A caller may also follow one kernel (``follow_request``): the owner answers ``owner_following``
lines — whether a run of it is queued or in flight, and, for an owner that watches the files,
within how many seconds it picks up a save — once at once and again at each change, until the
caller hangs up. The MCP ``verdict`` tool waits on it (``ktui.agents.verdicts``). An owner that
outlives its callers (a daemon, a watch, an MCP server's own queue) takes the first audits of their
references once their verdicts are out (``audit_request``, ``ktui.dispatch.owner_audits``). A
daemon also hosts views (``watch_request``, ``ktui.watch.service``) and answers ``status_request``
and ``stop_request``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import secrets
import socket
import threading
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from ktui.dispatch.identity import identity
from ktui.dispatch.peers import refused as refused_peer
from ktui.dispatch.placement import Placement
from ktui.dispatch.queue import Batch, NoVerdict, RunQueue
from ktui.protocol.events import Event, event_from_json
from ktui.protocol.job import Options
from ktui.protocol.notices import NOTICE_TYPES, QueueChanged, notice_from_json
from ktui.protocol.owner import (
    AuditRequest,
    CancelRequest,
    FollowRequest,
    Message,
    OwnerAuditing,
    OwnerDone,
    OwnerError,
    OwnerFollowing,
    OwnerStatus,
    OwnerStopping,
    OwnerTurn,
    ReleaseRequest,
    Request,
    RunRequest,
    StatusRequest,
    StopRequest,
    TurnRequest,
    WatchRequest,
    message_from_json,
)
from ktui.protocol.sourcelines import PARSING
from ktui.workspace.kernels import ProblemError, discover, find_root, state_dir

FOLDER = "owner"
# Set for a command started inside a turn the queue already gave (the dashboard's profile task):
# it must not ask for another, which would wait behind itself.
TURN_HELD_ENV = "KTUI_GPU_TURN_HELD"
STOPPED_READING = "cancelled: its caller stopped reading it"


class OwnerGone(RuntimeError):
    """The owner stopped (killed, crashed) before it answered every run of a request."""


class Refused(RuntimeError):
    """The owner refused the request, in one line (another placement, a bad token, a bad path)."""


def owner_folder(state: Path) -> Path:
    """``.ktui/owner``, made if need be and this user's alone (0700)."""
    folder = Path(state) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


def socket_path(state: Path) -> Path:
    return Path(state) / FOLDER / "socket"


def read_token(state: Path) -> str:
    """The workspace's token, as this user's processes read it (a kernel's sandbox cannot)."""
    try:
        return (Path(state) / FOLDER / "token").read_text().strip()
    except OSError:
        return ""


class Ownership:
    """The workspace's lock, held (``take``) for as long as this process owns its GPUs."""

    def __init__(self, fd: int, folder: Path):
        self._fd = fd
        self.folder = folder

    @classmethod
    def take(cls, state: Path, wait: bool = False) -> Ownership | None:
        """The lock, or None when another process owns the workspace (or its state cannot be
        written: a read-only workspace has no owner, each command runs on its own); ``wait``: until
        the owner that holds it lets it go."""
        try:
            folder = owner_folder(state)
            fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
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


class Audits(Protocol):
    """What an owner that outlives its callers does with the audits they hand over
    (``ktui.dispatch.owner_audits``)."""

    def take(self, kernels: list, options: Options) -> OwnerAuditing: ...


class Host(Protocol):
    """What a daemon adds to its owner's socket (``ktui.watch.service``): views, status, stopping."""

    def attach(self, request: WatchRequest, lines: Iterator[Message], send: Callable[[Any], None]) -> None: ...

    def status(self, status: OwnerStatus) -> OwnerStatus: ...

    def stop(self, request: StopRequest) -> OwnerStopping: ...


class _Line:
    """One connection's two directions: requests read as messages, replies written as lines."""

    def __init__(self, conn: socket.socket):
        self.conn = conn
        self._reader = conn.makefile("r", encoding="utf-8")
        self._writer = conn.makefile("w", encoding="utf-8")
        self._lock = threading.Lock()

    def read(self) -> Message | None:
        """The next request, or None when the caller hung up; ValueError for a line that is not one."""
        try:
            line = self._reader.readline()
        except (OSError, ValueError):
            return None
        if not line:
            return None
        return message_from_json(json.loads(line))

    def requests(self) -> Iterator[Message]:
        while (message := self.read()) is not None:
            yield message

    def send(self, item: Any) -> None:
        """An event, a notice or a reply; a caller gone leaves its runs going to their end."""
        text = item.dumps() if hasattr(item, "dumps") else json.dumps(item.to_json(), default=str)
        with self._lock:
            try:
                self._writer.write(text + "\n")
                self._writer.flush()
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        for stream in (self._writer, self._reader):
            with contextlib.suppress(OSError, ValueError):  # a caller gone: nothing to flush to
                stream.close()


class OwnerServer:
    """This process's ownership of a workspace (its lock, held from ``claim`` to ``close``), and its
    run queue served to other processes of this user on the workspace's socket."""

    def __init__(self, ownership: Ownership, placement: Placement | None = None, save_grace_s: float | None = None):
        self.ownership = ownership
        self.queue: RunQueue | None = None  # set by ``serve``
        self.placement = placement or Placement()
        self.save_grace_s = save_grace_s  # a watch: a save is queued within this many seconds; None: saves run nothing
        self.path = ownership.folder / "socket"
        self.host: Host | None = None  # a daemon's views, status and stop; None: a command's own owner
        self.audits: Audits | None = None  # callers' first audits, in its background; None: it ends with its command
        self.admit: Callable[[socket.socket], str] = refused_peer  # why a peer is refused ("" admits it)
        self.started = time.time()
        self.token = secrets.token_hex(16)
        self._sock: socket.socket | None = None
        self._closing = False
        self._calls = 0  # connections being served
        self._busy = 0  # of those, runs and turns in progress
        self._last = time.monotonic()  # when a connection last opened or closed
        self._lock = threading.Lock()

    @classmethod
    def claim(cls, state: Path, queue: RunQueue | None = None, placement: Placement | None = None,
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
        for name in ("socket", "token"):
            with contextlib.suppress(FileNotFoundError):
                (self.ownership.folder / name).unlink()  # we hold the lock: what is there is a crashed owner's
        _write_private(self.ownership.folder / "token", self.token)
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

    # -- what the daemon's idle clock reads -----------------------------------------------------------
    @property
    def calls(self) -> int:
        """Callers served now (runs, turns, follows, views; not a status or a stop)."""
        with self._lock:
            return self._calls

    @property
    def busy(self) -> bool:
        """A run or a turn is being served to a caller (the queue says what it runs itself)."""
        with self._lock:
            return self._busy > 0

    @property
    def quiet_s(self) -> float:
        """Seconds since a caller last came or went; 0 while one is served."""
        with self._lock:
            return 0.0 if self._calls else time.monotonic() - self._last

    @contextmanager
    def _counted(self, busy: bool = False) -> Iterator[None]:
        with self._lock:
            self._calls += 1
            self._busy += busy
        try:
            yield
        finally:
            with self._lock:
                self._calls -= 1
                self._busy -= busy
                self._last = time.monotonic()

    # -- serving ------------------------------------------------------------------------------------
    def _accept(self, sock: socket.socket) -> None:
        while not self._closing:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="ktui-owner-call", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            line = _Line(conn)
            try:
                self._answer(line)
            finally:
                line.close()

    def _answer(self, line: _Line) -> None:
        try:
            request = line.read()
            if request is None:
                return  # the caller hung up before it asked for anything
            refused = self._refused(line.conn, request)
            if refused:
                line.send(OwnerError(message=refused))
                return
            if isinstance(request, RunRequest):
                with self._counted(busy=True):
                    self._run(request, line)
            elif isinstance(request, TurnRequest):
                with self._counted(busy=True):
                    self._turn(request.label, line)
            elif isinstance(request, FollowRequest):
                with self._counted():
                    self._follow(Path(request.path), line)
            elif isinstance(request, AuditRequest) and self.audits is not None:
                line.send(self._audit(request))
            elif isinstance(request, StatusRequest):
                line.send(self.status())
            elif isinstance(request, StopRequest) and self.host is not None:
                line.send(self.host.stop(request))
            elif isinstance(request, WatchRequest) and self.host is not None:
                with self._counted():
                    self.host.attach(request, line.requests(), line.send)
            else:
                line.send(OwnerError(message=f"the owner of this workspace (pid {os.getpid()}) does not take a "
                                             f"{request.type} (it is a command's own, not the workspace's daemon)"))
        except (ProblemError, ValueError, KeyError, TypeError) as exc:
            line.send(OwnerError(message=str(exc)))
        except Exception as exc:  # a run that could not happen (no worker): the caller says why
            line.send(OwnerError(message=f"{type(exc).__name__}: {exc}"))

    def _refused(self, conn: socket.socket, request: Message) -> str:
        """Why this caller may not ask anything ("" when it may): no request, a wrong token, a
        process that descends from the owner's workers (``admit``)."""
        if not isinstance(request, Request):
            return f"{request.type} is a reply, not a request"
        peer = self.admit(conn)
        if peer:
            return peer
        if not secrets.compare_digest(request.token, self.token):
            return "refused: the request does not carry this workspace's token (.ktui/owner/token)"
        return ""

    def _run(self, request: RunRequest, line: _Line) -> None:
        asked = Placement.from_json(request.placement)
        if asked != self.placement:
            line.send(OwnerError(message=f"the owner of this workspace (pid {os.getpid()}) runs on "
                                         f"{self.placement.words()}, not {asked.words()}: stop it (ktui serve "
                                         f"--stop) or ask for {self.placement.words()}"))
            return
        with PARSING:  # CPython 3.11's parser is not safe in two threads at once
            kernels = discover([Path(p) for p in request.paths],
                               reference=Path(request.reference) if request.reference else None)
        options = Options(**request.options)
        batch = Batch(heard=line.send, reference=Path(request.reference) if request.reference else None)
        threading.Thread(target=self._cancels, args=(line, batch), name="ktui-owner-cancels", daemon=True).start()
        try:
            for _ in self.queue.batch(kernels, options, handle=batch):
                pass
        except NoVerdict as exc:
            line.send(OwnerError(message=str(exc)))
            return
        line.send(OwnerDone())

    def _audit(self, request: AuditRequest) -> OwnerAuditing:
        """A caller's verdicts are out: the references of its kernels no record covers are audited
        in this owner's background, after the caller has gone."""
        with PARSING:
            kernels = discover([Path(p) for p in request.paths],
                               reference=Path(request.reference) if request.reference else None)
        return self.audits.take(kernels, Options(**request.options))

    def _cancels(self, line: _Line, batch: Batch) -> None:
        """A caller stopped (a signal, a cancelled call) says so on its connection: its runs alone
        are cancelled. A caller that only hangs up leaves its runs going to their end."""
        for request in line.requests():
            if isinstance(request, CancelRequest):
                self.queue.cancel(request.reason, batch)

    def _turn(self, label: str, line: _Line) -> None:
        """A caller's own process (a profile, an audit) gets the first GPU in its turn and keeps it
        until it says ``release_request`` or hangs up: it never shares the GPU with a run of the queue."""
        ended = threading.Event()

        def work(cancel: threading.Event) -> None:
            try:
                line.send(OwnerTurn())
                while (request := line.read()) is not None and not isinstance(request, ReleaseRequest):
                    pass
            finally:
                ended.set()

        self.queue.submit_turn(label, work)
        ended.wait()

    def _follow(self, path: Path, line: _Line) -> None:
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
                    line.send(OwnerFollowing(busy=busy, save_grace_s=self.save_grace_s))

        self.queue.follow(tell)
        try:
            tell()
            while line.conn.recv(4096):  # nothing to read: b"" when the caller hangs up
                pass
        except OSError:
            pass
        finally:
            self.queue.unfollow(tell)

    def status(self) -> OwnerStatus:
        status = OwnerStatus(pid=os.getpid(), daemon=False, serves_views=False, root=str(self.ownership.folder.parent.parent),
                             placement=self.placement.to_json(), identity=identity(), started=self.started,
                             runs=self.queue.pending() if self.queue is not None else 0, views=0, callers=self.calls,
                             worker=any(r.warm for r in self.queue.runners) if self.queue is not None else False,
                             idle_s=0.0)
        return self.host.status(status) if self.host is not None else status

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
            for name in ("socket", "token"):
                with contextlib.suppress(FileNotFoundError):
                    (self.ownership.folder / name).unlink()

    def close(self) -> None:
        """Stop accepting callers and give the workspace's ownership back; again, nothing."""
        try:
            self.stop_accepting()
        finally:
            self.ownership.release()


def _write_private(path: Path, text: str) -> None:
    """``text`` in a file only this user may read (0600 from its creation)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class OwnerLink:
    """A caller's side: the workspace's owner, reached through its socket (a connection per request)."""

    def __init__(self, state: Path, pid: str):
        self.state = Path(state)
        self.pid = pid

    @classmethod
    def connect(cls, state: Path) -> OwnerLink | None:
        """The owner, or None when there is none (no socket, or one a crashed owner left)."""
        link = cls(state, owner_pid(state))
        try:
            link._open().close()
        except OSError:
            return None
        return link

    def _open(self) -> socket.socket:
        path = socket_path(self.state)
        if not path.exists():
            raise ConnectionRefusedError(f"no owner socket at {path}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            raise
        return sock

    def open(self, request: Request) -> Call:
        """A connection with ``request`` sent on it (a view's, which lasts); OwnerGone when the owner is gone."""
        return self._request(request)

    def _request(self, request: Request) -> Call:
        """A connection with ``request`` sent on it; OwnerGone when the owner is gone."""
        request.token = read_token(self.state)
        try:
            sock = self._open()
        except OSError as exc:
            raise OwnerGone(f"the owner of this workspace (pid {self.pid}) is gone: {exc}") from None
        call = Call(sock, self.pid)
        call.send(request)
        return call

    def ask(self, request: Request) -> Message:
        """The owner's one reply to ``request`` (a status, a stop); OwnerGone without one."""
        with self._request(request) as call:
            reply = call.next()
        if reply is None:
            raise OwnerGone(f"the owner of this workspace (pid {self.pid}) closed the connection without an answer")
        return reply

    def status(self) -> OwnerStatus:
        reply = self.ask(StatusRequest())
        if not isinstance(reply, OwnerStatus):
            raise Refused(getattr(reply, "message", f"the owner answered {reply.type}"))
        return reply

    @contextmanager
    def turn(self, label: str) -> Iterator[None]:
        """Hold the owner's first GPU while the body runs (it waits for the runs ahead of it)."""
        with self._request(TurnRequest(label=label)) as call:
            reply = call.next()
            if not isinstance(reply, OwnerTurn):
                raise OwnerGone(f"the owner of this workspace (pid {self.pid}) stopped before giving {label} its turn"
                                + (f": {reply.message}" if isinstance(reply, OwnerError) else ""))
            try:
                yield
            finally:
                call.send(ReleaseRequest())

    def run(self, paths: list[Path], options: Options, placement: Placement | None = None,
            reference: Path | None = None) -> RunCall:
        """The owner's runs of ``paths``: iterate it for their events (``RunCall``)."""
        request = RunRequest(paths=[str(Path(p).resolve()) for p in paths], options=_options_json(options),
                             placement=(placement or Placement()).to_json(),
                             reference=str(Path(reference).resolve()) if reference else None)
        return RunCall(self._request(request), self.pid)

    def audit(self, paths: list[Path], options: Options, reference: Path | None = None) -> OwnerAuditing:
        """Hand the owner the first audits of ``paths``' references (``OwnerAuditing``: what it took);
        ``Refused`` from an owner that does not take them (one that ends with its command)."""
        request = AuditRequest(paths=[str(Path(p).resolve()) for p in paths], options=_options_json(options),
                               reference=str(Path(reference).resolve()) if reference else None)
        reply = self.ask(request)
        if not isinstance(reply, OwnerAuditing):
            raise Refused(getattr(reply, "message", f"the owner answered {reply.type}"))
        return reply

    def follow(self, path: Path) -> Following:
        """Follow the kernel at ``path`` in the owner's queue (``Following.next``)."""
        call = self._request(FollowRequest(path=str(Path(path).resolve())))
        return Following(call.sock, self.pid)


def _options_json(options: Options) -> dict[str, Any]:
    return dataclasses.asdict(options)


class Call:
    """One connection to the owner: requests out, events, notices and replies in."""

    def __init__(self, sock: socket.socket, pid: str):
        self.sock = sock
        self.pid = pid
        self._reader = sock.makefile("r", encoding="utf-8")
        self._lock = threading.Lock()

    def send(self, request: Request) -> None:
        with self._lock:
            self.sock.sendall((request.dumps() + "\n").encode())

    def next(self) -> Any:
        """The next line read back (an ``Event``, a notice or a reply); None when the owner hung up."""
        try:
            line = self._reader.readline()
        except OSError:
            return None
        if not line:
            return None
        data = json.loads(line)
        kind = data.get("type")
        if kind in NOTICE_TYPES:
            return notice_from_json(data)
        try:
            return message_from_json(data)
        except ValueError:
            return event_from_json(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError, ValueError):
            self._reader.close()
        self.sock.close()

    def __enter__(self) -> Call:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RunCall:
    """The events of one request's runs as the owner sends them; ``cancel`` stops those runs."""

    def __init__(self, call: Call, pid: str):
        self.call = call
        self.pid = pid

    def __iter__(self) -> Iterator[Event]:
        """``OwnerGone`` when the owner stops before answering them all, ``Refused`` with its one
        line when it refuses the request, ``NoVerdict`` when a kernel ended without one."""
        with self.call:
            try:
                while (item := self.call.next()) is not None:
                    if isinstance(item, OwnerDone):
                        return
                    if isinstance(item, OwnerError):
                        raise (NoVerdict if item.message.startswith("no verdict for ") else Refused)(item.message)
                    if isinstance(item, Event):
                        yield item
            except GeneratorExit:
                self.cancel(STOPPED_READING)  # nobody reads these runs any more (``ktui run | head -1``)
                raise
        raise OwnerGone(f"the owner of this workspace (pid {self.pid}) stopped before its runs finished: "
                        "run the command again (a new owner takes over)")

    def cancel(self, reason: str) -> None:
        """Cancel this request's runs (from any thread); those other callers share run on."""
        with contextlib.suppress(OSError):
            self.call.send(CancelRequest(reason=reason))


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
        if item.get("type") == OwnerError.type:
            raise Refused(item.get("message", "the owner refused"))
        return item

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
