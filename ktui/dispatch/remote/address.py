"""``--remote [user@]host[:port][:/remote/dir]``: where a remote run goes, parsed once, strictly.

The host reaches ssh as an argument, so a value that ssh would read as an option (a leading
dash) or that holds whitespace is refused here, with the form that is expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FORM = "[user@]host[:port][:/remote/dir]"
_HOST = re.compile(r"^[A-Za-z0-9_.%\-]+$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-]*$")


@dataclass(frozen=True)
class RemoteAddress:
    host: str
    user: str | None = None
    port: int | None = None
    directory: str | None = None  # None: ``~/.ktui-remote`` on the remote

    @property
    def display(self) -> str:
        """``user@host:port``, as the history and the dashboard name it."""
        where = f"{self.user}@{self.host}" if self.user else self.host
        return f"{where}:{self.port}" if self.port else where

    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def parse_remote(value: str) -> RemoteAddress:
    """The address in ``value``; ValueError with the expected form when it is not one."""
    text = value.strip()
    if not text:
        raise ValueError(f"--remote needs a host: {FORM}")
    directory = None
    head, sep, tail = text.partition(":/")
    if not sep:
        head, sep, tail = text.partition(":~")
        if sep:
            tail = "~" + tail
    else:
        tail = "/" + tail
    if sep:
        directory = tail
        text = head
    user = None
    if "@" in text:
        user, _, text = text.rpartition("@")
        if not _USER.match(user):
            raise ValueError(f"--remote {value!r}: {user!r} is not a user name ({FORM})")
    port = None
    if ":" in text:
        text, _, port_text = text.partition(":")
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"--remote {value!r}: the port must be a number from 1 to 65535, got {port_text!r} ({FORM})")
        port = int(port_text)
    if not text or text.startswith("-") or not _HOST.match(text):
        raise ValueError(f"--remote {value!r}: {text!r} is not a host name ({FORM})")
    if directory is not None and (not directory.rstrip("/") or "\0" in directory):
        raise ValueError(f"--remote {value!r}: the remote directory must name a folder, not {directory!r}")
    return RemoteAddress(host=text, user=user, port=port, directory=directory.rstrip("/") if directory else None)
