"""Whether the out-of-memory killer ended a worker: "killed by SIGKILL" alone does not say who
sent the signal, and a user then hunts for a bug that is a memory limit.

Two marks, either enough: the kernel log naming the process (``/dev/kmsg``, where this user may
read it; a record from before the process started is another process of the same pid), and the
``oom_kill`` counter of the worker's memory cgroup rising during its job (a container's limit;
another process of the same cgroup may be the one it counts, so that one reads "most likely").
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from ktui.protocol.cgroups import MemoryCgroup, memory_cgroup
from ktui.protocol.processes import start_ticks

KMSG = "/dev/kmsg"
_KILLED = re.compile(r"(?:Killed process |oom-kill:.*\bpid=)(\d+)\b")


@dataclass
class OomWatch:
    """Taken when a worker starts and before each job: what its death is compared with."""

    pid: int
    started_us: int | None  # boot-relative, as the kernel log stamps its records
    cgroup: MemoryCgroup | None
    kills: int | None = None  # the cgroup's oom_kill count when its current job began

    @classmethod
    def of(cls, pid: int) -> OomWatch:
        ticks = start_ticks(pid)
        started = None if ticks is None else ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")
        return cls(pid, started, memory_cgroup(pid))

    def job_started(self) -> None:
        self.kills = self.cgroup.oom_kills() if self.cgroup is not None else None

    def evidence(self) -> str:
        """Why the out-of-memory killer is the likely sender of a SIGKILL, in words; "" with no mark."""
        if self.started_us is not None and self.pid in killed_since(self.started_us):
            return "by the out-of-memory killer, says the kernel log"
        now = self.cgroup.oom_kills() if self.cgroup is not None else None
        if now is not None and self.kills is not None and now > self.kills:
            limit = self.cgroup.limit()
            within = f" ({limit / 1e9:.2f} GB limit)" if limit is not None else ""
            return (f"most likely by the out-of-memory killer: its memory cgroup{within} counted {now - self.kills} "
                    f"OOM kill(s) during the run, {self.cgroup.folder}")
        return ""


def killed_since(since_us: int, path: str | None = None) -> set[int]:
    """The pids the kernel log (``path``, else ``KMSG``) says the OOM killer ended at or after
    ``since_us`` (boot-relative microseconds); empty where the log cannot be read."""
    try:
        fd = os.open(path or KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return set()
    pids: set[int] = set()
    try:
        while True:
            try:
                record = os.read(fd, 8192).decode("utf-8", errors="replace")
            except BlockingIOError:  # the end of the log
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while reading: go on from the next
                    continue
                break
            head, _, text = record.partition(";")
            fields = head.split(",")
            if len(fields) >= 3 and fields[2].isdigit() and int(fields[2]) >= since_us:
                pids.update(int(m.group(1)) for m in _KILLED.finditer(text))
    finally:
        os.close(fd)
    return pids
