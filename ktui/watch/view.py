"""A ``ktui watch`` that views the workspace's daemon: the dashboard or ``--headless`` on the
daemon's one watch of the files, its one queue and its warm worker (``ktui.watch.service``).

It answers the dashboard as a ``WatchLoop`` does (``start``, ``close``, ``rerun``, ``rerun_all``,
``run_task``, ``set_options``) and hands its listener every event and notice the daemon sends, in
its reader's thread. A second ``ktui watch`` of the workspace is a second view of the same watch;
the daemon stops watching when the last view goes. If the daemon goes away, ``gone`` is set and the
listener is told once (``JobProblem``).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from ktui.dispatch.owner import Call, OwnerLink, Refused
from ktui.dispatch.queue import Listener
from ktui.protocol.job import Options
from ktui.protocol.notices import JobProblem
from ktui.protocol.owner import (
    DetachRequest,
    OptionsRequest,
    OwnerError,
    RerunAllRequest,
    RerunRequest,
    TaskRequest,
    WatchRequest,
)
from ktui.watch.loop import WatchSettings
from ktui.workspace.folder import Workspace


class WatchView:
    def __init__(self, link: OwnerLink, workspace: Workspace, options: Options, listener: Listener,
                 settings: WatchSettings | None = None):
        self.link = link
        self.workspace = workspace
        self.options = options
        self.listener = listener
        self.settings = settings or WatchSettings()
        self.gone = threading.Event()  # the daemon went away: nothing more will come
        self._call: Call | None = None
        self._closing = False
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Attach to the daemon's watch (again: nothing); ``Refused`` (one line) when the owner
        hosts no views (a ``--no-daemon`` command's), OwnerGone when it is gone."""
        if self._call is not None:
            return
        call = self.link.open(WatchRequest(options=dataclasses.asdict(self.options), settings=self.settings.to_json()))
        first = call.next()
        if first is None or isinstance(first, OwnerError):
            call.close()
            raise Refused(first.message if first is not None else f"the owner (pid {self.link.pid}) hung up")
        self._call = call
        self.listener(first)
        self._reader = threading.Thread(target=self._read, name="ktui-view", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._call is not None
        while (item := self._call.next()) is not None:
            self.listener(item)
        if not self._closing:
            self.gone.set()
            self.listener(JobProblem("", f"the workspace's daemon (pid {self.link.pid}) stopped: "
                                         "restart ktui watch to start a new one"))

    def close(self, reason: str = "cancelled: the watch stopped") -> None:
        """Detach; the last view's ``reason`` cancels the watch's run in flight."""
        self._closing = True
        call, self._call = self._call, None
        if call is None:
            return
        try:
            call.send(DetachRequest(reason=reason))
        except OSError:
            pass  # the daemon is gone already
        call.close()
        if self._reader is not None:
            self._reader.join(timeout=5)

    def _send(self, request) -> None:
        if self._call is not None:
            try:
                self._call.send(request)
            except OSError:
                pass  # the reader tells of the daemon's end

    # -- from the UI / a script ----------------------------------------------------------------
    def set_options(self, options: Options) -> None:
        self.options = options
        self._send(OptionsRequest(options=dataclasses.asdict(options)))

    def rerun(self, path: Path) -> bool:
        kernel = self.workspace.kernel(Path(path))
        if kernel is None:
            return False
        self._send(RerunRequest(path=str(kernel.path)))
        return True

    def rerun_all(self) -> int:
        count = len(self.workspace.kernels())
        self._send(RerunAllRequest())
        return count

    def run_task(self, name: str, path: Path) -> bool:
        kernel = self.workspace.kernel(Path(path))
        if kernel is None:
            return False
        self._send(TaskRequest(name=name, path=str(kernel.path)))
        return True
