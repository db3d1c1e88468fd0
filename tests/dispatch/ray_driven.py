"""The Ray tests' driver: kernels judged on a ``RayPool``'s runners through the one run queue,
as ``ktui run --ray`` drives them."""

from __future__ import annotations

from ktui.dispatch.queue import RunQueue
from ktui.dispatch.session import Session
from ktui.protocol.events import RunFinished
from ktui.protocol.job import Options
from ktui.workspace.kernels import Kernel


def judged(pool, kernels: list[Kernel], options: Options, consumers=()) -> list[RunFinished]:
    """Each kernel's verdict, in the order they finish; ``consumers`` get every event as it comes."""
    consumers = list(consumers)
    queue = RunQueue(Session(kernels[0].root, runner=pool.runners[0], consumers=consumers), options,
                     listener=lambda item: None, warm_up=False, runners=pool.runners, consumers=consumers)
    queue.start()
    try:
        return [finished for _, finished in queue.batch(kernels, options)]
    finally:
        queue.close()
