"""What the run queue says besides the loop's own events: its queue, where runs happen, a job that
could not run. The JSON types keep their ``watch_*`` names: the dashboard and headless watch read them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class Notice:
    """Something the run queue (or the watch loop) says besides the loop's own events."""

    type: ClassVar[str] = "watch_notice"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **asdict(self)}


@dataclass(frozen=True)
class QueueChanged(Notice):
    type: ClassVar[str] = "watch_queue"
    running: str | None  # kernel id of the run in flight (the first GPU's, with several)
    queued: tuple[str, ...] = ()  # kernel ids waiting, in order
    cancelling: bool = False  # a run in flight is stale and being cancelled
    background: str | None = None  # what background work is in flight ("auditing relu"), not a kernel's run
    also_running: tuple[str, ...] = ()  # with several GPUs: the kernels running on the others
    # The order the snapshots were taken in: several threads emit them, so a listener may receive
    # an older one after a newer one (and must then keep the newer).
    seq: int = 0


@dataclass(frozen=True)
class RunnerReady(Notice):
    """Where runs happen, known once the worker has started."""

    type: ClassVar[str] = "watch_device"
    tier: str
    device: str
    arch: str
    gpus: tuple[str, ...] = ()  # with several GPUs: the index of each, one worker per GPU
    confined: bool | None = None  # whether the worker confines user code (``ktui.worker.confine``)
    confinement: str = ""  # "landlock ABI 7: writes, reads, network, signals" or "not confined: <why>" (protocol.sandbox)


@dataclass(frozen=True)
class JobProblem(Notice):
    """A job that could not run at all (file vanished, worker would not start)."""

    type: ClassVar[str] = "watch_error"
    kernel: str
    message: str
