"""Several GPUs of one host: one warm worker per GPU, different kernels in parallel.

Each device (``ktui.run.devices``) gets a ``LocalRunner`` whose worker sees only that GPU
(``CUDA_VISIBLE_DEVICES=<index>``), so a job reaches a GPU only when its previous job has ended:
never two timed runs on one GPU. ``run(jobs)`` hands back each job with its events in the order
the jobs finish, like ``ktui.run.ray_pool.RayPool`` (whose ``evaluate`` records them through
the sessions). A worker that dies ends its own run ``crashed``; its runner replaces it for the
next job and the other GPUs carry on. The run queue (``ktui.run.queue``: ``ktui watch``,
``ktui run --gpus``) uses ``runners`` directly, one thread per GPU; each pinned runner names its
GPU in the run's summary (``ran_on``).
"""

from __future__ import annotations

import dataclasses
import queue
import threading
from collections import deque
from typing import Any, Iterator

from ktui.protocol.events import ERROR, Event, RunFinished
from ktui.protocol.job import Job
from ktui.run.devices import Device
from ktui.run.never_ran import never_ran
from ktui.run.runner import LocalRunner, WorkerConfig, WorkerStartError

STOPPED = "cancelled: ktui stopped before this run finished"


class DevicePool:
    """One ``LocalRunner`` per device, each pinned to its GPU."""

    def __init__(self, devices: list[Device], config: WorkerConfig | None = None, fresh_each_run: bool = False):
        if not devices:
            raise ValueError("a device pool needs at least one device")
        base = config or WorkerConfig()
        self.devices = list(devices)
        self.runners = [LocalRunner(dataclasses.replace(base, gpu=d.index, gpu_uuid=d.uuid, pin_gpu=True),
                                    fresh_each_run=fresh_each_run) for d in self.devices]

    def run(self, jobs: list[Job]) -> Iterator[tuple[Job, Event]]:
        """Each event with its job as it comes (the runs of different GPUs interleave, each run's
        in order, ending with its ``RunFinished``); a GPU whose worker cannot start ends its job
        ``error`` and takes no more (the others take the rest). Two jobs of one kernel version
        (one run folder) never run at once: the second waits for the first."""
        pending = deque(jobs)
        results: queue.Queue[tuple[Job, Event]] = queue.Queue()
        lock = threading.Condition()
        stop = threading.Event()
        busy: set[str] = set()  # the run folders in flight: two runs of one version share a folder

        def take() -> Job | None:
            """The next job whose run folder no other GPU is writing (waiting while only such
            jobs are left), or None when nothing is left or the pool stops."""
            with lock:
                while pending and not stop.is_set():
                    job = next((j for j in pending if j.run_dir not in busy), None)
                    if job is not None:
                        pending.remove(job)
                        busy.add(job.run_dir)
                        return job
                    lock.wait(timeout=0.5)
                return None

        def serve(device: Device, runner: LocalRunner) -> None:
            while (job := take()) is not None:
                try:
                    for event in runner.run(job):
                        results.put((job, event))
                except WorkerStartError as exc:
                    for event in never_ran(job, ERROR, f"{device.label()}: {exc}"):
                        results.put((job, event))
                    return
                finally:
                    with lock:
                        busy.discard(job.run_dir)
                        lock.notify_all()

        threads = [threading.Thread(target=serve, args=(d, r), name=f"ktui-gpu-{d.index}", daemon=True)
                   for d, r in zip(self.devices, self.runners)]
        for thread in threads:
            thread.start()
        handed = 0
        try:
            while handed < len(jobs):
                try:
                    item = results.get(timeout=0.5)
                except queue.Empty:
                    if any(t.is_alive() for t in threads) or not results.empty():
                        continue
                    with lock:  # every GPU stopped taking jobs: the rest cannot run
                        left = list(pending)
                        pending.clear()
                    for job in left:
                        handed += 1
                        for event in never_ran(job, ERROR, "no GPU left to run it: no worker would start"):
                            yield job, event
                    continue
                if isinstance(item[1], RunFinished):
                    handed += 1
                yield item
        finally:
            stop.set()
            if handed < len(jobs):  # the caller stopped early: nothing it no longer reads runs on
                with lock:
                    pending.clear()
                for runner in self.runners:
                    runner.cancel(STOPPED)
            for thread in threads:
                thread.join(timeout=30)

    def describe(self) -> dict[str, Any]:
        """The first GPU's worker as the others see themselves, and every GPU's label."""
        return {**self.runners[0].describe(), "gpus": [d.index for d in self.devices]}

    def close(self) -> None:
        closers = [threading.Thread(target=r.close, daemon=True) for r in self.runners]
        for thread in closers:
            thread.start()
        for thread in closers:
            thread.join(timeout=30)
