"""Several GPUs of one host: one warm worker per GPU, different kernels in parallel.

Each device (``ktui.dispatch.gpus``) gets a ``WorkerRunner`` whose worker sees only that GPU
(``CUDA_VISIBLE_DEVICES=<index>``), so a job reaches a GPU only when its previous job has ended:
never two timed runs on one GPU. The run queue (``ktui.dispatch.queue``: ``ktui watch``, ``ktui run
--gpus``, ``ktui serve``) drives ``runners``, one thread per GPU; each pinned runner names its GPU
in the run's summary (``ran_on``). A worker that dies ends its own run ``crashed``; its runner
replaces it for the next job and the other GPUs carry on.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from ktui.dispatch.gpus import Device
from ktui.dispatch.runner import WorkerConfig, WorkerRunner


class DevicePool:
    """One ``WorkerRunner`` per device, each pinned to its GPU."""

    def __init__(self, devices: list[Device], config: WorkerConfig | None = None, fresh_each_run: bool = False):
        if not devices:
            raise ValueError("a device pool needs at least one device")
        base = config or WorkerConfig()
        self.devices = list(devices)
        self.runners = [WorkerRunner(dataclasses.replace(base, gpu=d.index, gpu_uuid=d.uuid, pin_gpu=True),
                                    fresh_each_run=fresh_each_run) for d in self.devices]

    def describe(self) -> dict[str, Any]:
        """The first GPU's worker as the others see themselves, and every GPU's label."""
        return {**self.runners[0].describe(), "gpus": [d.index for d in self.devices]}

    def close(self) -> None:
        closers = [threading.Thread(target=r.close, daemon=True) for r in self.runners]
        for thread in closers:
            thread.start()
        for thread in closers:
            thread.join(timeout=30)
