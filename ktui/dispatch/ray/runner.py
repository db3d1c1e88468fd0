"""One Ray actor as a runner of the run queue (``RayRunner``): the queue hands it a job when the
previous one has ended, as it does a ``DevicePool``'s pinned runners; the actors and what they
share (Ray, the shipper, the limits) are the ``RayPool``'s (``ktui.dispatch.ray.pool``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ktui.dispatch.never_ran import never_ran
from ktui.dispatch.ray.files import write_shipped
from ktui.dispatch.runner import REPLACED, Runner
from ktui.protocol.events import CRASHED, ERROR, Event, RunFinished, RunStarted, event_from_json
from ktui.protocol.job import Job

STOPPED = "cancelled: the driver stopped following this run"


class RayRunner(Runner):
    """A ``Runner`` whose worker is one Ray actor of a ``RayPool``: the run queue hands it a job
    when the previous one has ended, and it yields the actor's events as they stream back (their
    files written first). The job's workspace is shipped before it is dispatched; a job that cannot
    be shipped ends ``error`` with the reason. An actor that dies ends its run ``crashed`` with
    Ray's reason, and a fresh actor takes its place for the next job."""

    def __init__(self, pool, actor: Any):  # pool: a ``RayPool``
        self.pool = pool
        self.actor = actor
        self._run_id = ""  # the job in flight on the actor ("" when none)

    @property
    def warm(self) -> bool:
        return self.actor is not None

    def describe(self) -> dict[str, Any]:
        where = self.pool.ray.get(self.actor.ran_on.remote()) if self.actor is not None else {}
        return {"tier": "ray", "device": f"Ray node {where.get('node', '?')}, GPU {where.get('gpu')}",
                "arch": self.pool.config.arch or "?"}

    def run(self, job: Job) -> Iterator[Event]:
        shipment, refusal = self.pool.ship(job)
        if shipment is None:
            yield from _ended(job, ERROR, refusal, "NotShipped")
            return
        if self.actor is None:  # its actor died and no replacement could be made then: try again
            self.actor = self.pool.replace(None)
        if self.actor is None:
            yield from _ended(job, CRASHED, "no Ray actor left to run it: the cluster has no room for one",
                              "NoActorLeft")
            return
        ray = self.pool.ray
        stream = self.actor.run.options(num_returns="streaming").remote(job.to_json(), shipment)
        run = _Streaming(job, self.actor)
        self._run_id = job.run_id
        try:
            if self.pool.on_dispatch is not None:
                self.pool.on_dispatch(job, self.actor)
            ended = False
            while not ended:
                events, ended = self._next(ray, stream, run)
                yield from events
        finally:
            self._run_id = ""
            if not run.finished and self.actor is not None and run.actor is self.actor:
                self.actor.cancel.remote(STOPPED, job.run_id)  # the caller stopped: end the actor's run too

    def _next(self, ray, stream, run: _Streaming) -> tuple[list[Event], bool]:
        """The events the stream's next item brings (its files written first), and whether the run
        has ended; an actor that died or failed ends it with Ray's reason."""
        job = run.job
        try:
            item = ray.get(next(stream))
        except StopIteration:
            if run.finished:
                return [], True
            return _closing(job, run, CRASHED, "the Ray actor's stream ended before the run finished",
                            "StreamEnded"), True
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError) as exc:
            events = self._lost(ray, job, run, exc)
            self.actor = self.pool.replace(run.actor)
            return events, True
        except ray.exceptions.RayTaskError as exc:  # the actor lives; its worker could not start
            cause = exc.cause or exc  # what the actor raised
            return _closing(job, run, ERROR, f"the Ray actor could not run it: {type(cause).__name__}: {cause}",
                            type(cause).__name__), True
        write_shipped(job.run_dir, item["files"])
        event = _with_place(event_from_json(item["event"]), item["where"])
        run.started = run.started or isinstance(event, RunStarted)
        run.finished = isinstance(event, RunFinished)
        return [event], False  # ended by the stream's end, which follows its run_finished

    @staticmethod
    def _lost(ray, job: Job, run: _Streaming, exc: Exception) -> list[Event]:
        """The run of an actor that died: ended ``crashed``, with Ray's reason."""
        kind = "RayActorError" if isinstance(exc, ray.exceptions.RayActorError) else "WorkerCrashedError"
        if type(exc).__name__ != kind:
            kind += f" ({type(exc).__name__})"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "no reason given"
        return _closing(job, run, CRASHED, f"the Ray actor running it died: {kind}: {reason}", type(exc).__name__)

    def cancel(self, reason: str = REPLACED, run_id: str | None = None) -> None:
        """Stop the run in flight (from any thread): the actor kills its worker's process group and
        the run ends ``cancelled`` with ``reason``; with ``run_id``, only if that run is in flight."""
        current, actor = self._run_id, self.actor
        if not current or actor is None or (run_id is not None and run_id != current):
            return
        actor.cancel.remote(reason, current)

    def close(self) -> None:
        """Nothing of its own: the pool ends the actors (``RayPool.close``)."""


@dataclass
class _Streaming:
    """A job an actor is running: what of its stream has arrived so far."""

    job: Job
    actor: Any
    started: bool = False
    finished: bool = False


def _closing(job: Job, run: _Streaming, verdict: str, message: str, error: str) -> list[Event]:
    """The end of a run its actor did not finish: its start too, unless that already arrived."""
    if run.finished:
        return []
    events = _ended(job, verdict, message, error)
    return events[1:] if run.started else events


def _ended(job: Job, verdict: str, message: str, error: str) -> list[Event]:
    """A run that no actor finished, saying which error lost it."""
    return never_ran(job, verdict, message, summary={"ran_on": {"node": None, "gpu": None, "error": error}})


def _with_place(event: Event, where: dict[str, Any]) -> Event:
    """A run's summary names the node and GPU that ran it (``ran_on``)."""
    if isinstance(event, RunFinished):
        event.summary = {**event.summary, "ran_on": {"node": where["node"], "node_id": where["node_id"],
                                                     "gpu": where["gpu"]}}
    return event
