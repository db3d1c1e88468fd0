"""Ray as a placement of the run queue (``--ray`` of ``ktui run``, ``serve``, ``watch`` and ``mcp``): one warm worker per GPU.

Ray places the work; ktui keeps its rules. Each GPU gets one long-lived actor (``num_gpus=1``)
holding a ``WorkerRunner``, so its compile caches stay warm; the CPU tier gets one actor per CPU.
Each actor is the body of one ``RayRunner``, and the run queue (``ktui.dispatch.queue``) drives those
runners as it drives a ``DevicePool``'s: a job reaches an actor only when the previous one has
ended, never two timed runs on one GPU. The queue prepares every Job (versions, run folders) and
hands the events through its ``Session`` consumers as they come: each actor's run is a Ray
streaming generator, so an event (a rung's result) reaches the history and ``--json`` when its
rung ends, not when the job does. An actor that dies (killed, its node lost) ends its run
``crashed`` with Ray's reason, and a fresh actor takes its place for that runner's next job.

A Ray instance ktui starts (``--ray`` with no address) is this machine's alone and listens on
loopback only — its GCS, raylet, driver and workers — for Ray has no authentication: anyone who
reaches one of its ports can run code as this user. Joining a cluster is only ever the user's
explicit address (``auto`` or ``host:port``); what that exposes is that cluster's, as set up.

No node needs the workspace: each job's workspace files are shipped with it, once per version
(``ray.ship``), and the actor runs the job from its own copy. An actor's worker writes its run
folder in a scratch folder of its own node; the files come back with the events and land where
a local run puts them (``ray.files``).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ktui.dispatch.ray.files import MAX_FILE_BYTES, MAX_RUN_BYTES, ScratchRun, WorkspaceCopies, scratch_root
from ktui.dispatch.ray.runner import RayRunner
from ktui.dispatch.ray.ship import Bundle, Shipper
from ktui.dispatch.runner import WorkerConfig, WorkerRunner
from ktui.protocol.job import Job

INSTALL_HINT = "--ray needs Ray: pip install -e '.[ray]' (or pip install 'ray>=2.40')"
LOCAL = "local"  # ``--ray`` with no address: start a Ray instance on this machine
LOOPBACK = "127.0.0.1"


class RayMissing(RuntimeError):
    """Ray is not installed; the message says how to install it."""


# Ray's own switch for a machine that is no cluster (its default on macOS and Windows): the node's
# address is loopback, so every port of the instance binds 127.0.0.1. Read when Ray is imported.
LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def import_ray(local: bool = False):
    """Ray, imported; ``local``: for an instance of this machine alone, on loopback."""
    if local:
        os.environ[LOOPBACK_ONLY] = "0"  # before the import, and for every process of the instance
    try:
        import ray  # deferred: an optional extra, and slow to import
    except ImportError:
        raise RayMissing(INSTALL_HINT) from None
    if local:
        from ray._private import ray_constants  # deferred: Ray's, imported with it

        ray_constants.ENABLE_RAY_CLUSTER = False  # Ray was imported earlier in this process, before the switch
    return ray


class EvalWorker:
    """The body of one Ray actor: a warm ``WorkerRunner``, the place it runs (node, GPU), and the
    node-private scratch folder its runs write into."""

    def __init__(self, config: dict[str, Any], fresh_each_run: bool = False,
                 max_file_bytes: int = MAX_FILE_BYTES, max_run_bytes: int = MAX_RUN_BYTES):
        import ray

        self.scratch = scratch_root()
        # its worker writes only this node's scratch folder: the runs' folders and the workspace copies
        self.runner = WorkerRunner(WorkerConfig(**{**config, "writable": (str(self.scratch),)}),
                                  fresh_each_run=fresh_each_run)
        self.workspaces = WorkspaceCopies(self.scratch)
        self.limits = (max_file_bytes, max_run_bytes)
        context = ray.get_runtime_context()
        gpus = ray.get_gpu_ids()
        self.where = {"node": socket.gethostname(), "node_id": context.get_node_id(),
                      "gpu": _gpu_index(gpus[0]) if gpus else None, "pid": os.getpid()}

    def ran_on(self) -> dict[str, Any]:
        return {**self.where, "scratch": str(self.scratch),
                "workspaces": sorted(p.name for p in self.workspaces.base.iterdir() if not p.name.startswith("."))}

    def run(self, job: dict[str, Any], shipment: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """One job, streamed, run from this node's copy of its workspace (``shipment``, from
        ``ray.ship.Shipper``): for each event, ``{"files": ..., "event": ..., "where": ...}`` with
        the run folder's files written since the previous event (so a file is here before the
        event that follows it, and all of them before ``run_finished``)."""
        import ray

        copy = self.workspaces.get(shipment["digest"], lambda: ray.get(shipment["files"][0]))
        scratch = ScratchRun(self.scratch, Job.from_json(job), *self.limits, copy=copy, outside=shipment["outside"])
        place = f"node {self.where['node']} ({self.where['node_id'][:12]})"
        try:
            for event in self.runner.run(scratch.job):
                files = scratch.new_files()
                yield {"files": files, "event": scratch.back(event.to_json(), place), "where": dict(self.where)}
        finally:
            scratch.close()

    def cancel(self, reason: str, run_id: str) -> None:
        """End the run ``run_id`` if it is the one in flight (called while ``run`` streams: the
        actor takes two calls at once)."""
        self.runner.cancel(reason, run_id=run_id)

    def close(self) -> None:
        try:
            self.runner.close()
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _gpu_index(gpu: Any) -> int | str:
    """Ray names a GPU by its index, or by its CUDA_VISIBLE_DEVICES entry (a UUID) where that is one."""
    try:
        return int(gpu)
    except ValueError:
        return str(gpu)


@dataclass
class Placement:
    """Where a pool's actors go: ``gpus`` actors of one GPU each, else ``cpus`` actors of one CPU."""

    gpus: int
    cpus: int

    @property
    def actors(self) -> int:
        return self.gpus or self.cpus


class RayPool:
    """Actors on a Ray cluster, each the body of one ``RayRunner`` (``runners``): the run queue
    (``ktui.dispatch.queue``) drives them as it drives a ``DevicePool``'s pinned runners, one job at a
    time each, and each runner streams its actor's events back as they come.

    ``address``: ``local`` (start Ray here, or use the instance this process already started),
    ``auto`` or ``ray://host:port`` (join a cluster). ``resources``: custom Ray resources each
    actor asks for, which puts the actors on the nodes that have them (and no more actors than
    those nodes hold). ``on_shipped(bundles)`` is called once a job's workspace is read and in
    Ray's store, before that job is dispatched; ``on_dispatch(job, actor)`` as each job is handed to an
    actor. ``max_file_bytes`` / ``max_run_bytes``: what an actor ships back of a run folder;
    ``max_workspace_file_bytes``: the largest workspace file shipped to the actors."""

    def __init__(self, address: str = LOCAL, config: WorkerConfig | None = None, fresh_each_run: bool = False,
                 num_cpus: int | None = None, on_dispatch: Callable[[Job, Any], None] | None = None,
                 resources: dict[str, float] | None = None, max_file_bytes: int = MAX_FILE_BYTES,
                 max_run_bytes: int = MAX_RUN_BYTES, max_workspace_file_bytes: int = MAX_FILE_BYTES,
                 on_shipped: Callable[[list[Bundle]], None] | None = None):
        self.ray = import_ray(local=address == LOCAL)
        self.address = address
        self.on_shipped = on_shipped
        self.config = config or WorkerConfig()
        self.fresh_each_run = fresh_each_run
        self.on_dispatch = on_dispatch
        self.resources = dict(resources or {})
        self.limits = (max_file_bytes, max_run_bytes)
        self._started_ray = False
        if not self.ray.is_initialized():
            self._init(address, num_cpus)
        try:
            self.placement = self._placement(num_cpus)
        except ValueError:
            if self._started_ray:  # nothing of this pool outlives its refusal
                self.ray.shutdown()
            raise
        self.shipper = Shipper(self.ray, max_workspace_file_bytes)
        self._shipping = threading.Lock()  # the runners ship from the queue's threads
        self._actor_class = self.ray.remote(EvalWorker)
        self.runners = [RayRunner(self, self._new_actor()) for _ in range(self.placement.actors)]

    @property
    def actors(self) -> list[Any]:
        """Each runner's actor, in the runners' order (a runner whose actor died and found no
        replacement has none)."""
        return [runner.actor for runner in self.runners if runner.actor is not None]

    def _init(self, address: str, num_cpus: int | None) -> None:
        quiet = {"include_dashboard": False, "logging_level": logging.ERROR, "log_to_driver": False,
                 "configure_logging": True}
        if address == LOCAL:  # a new instance of its own: with no address Ray joins one already running here
            self.ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, _node_ip_address=LOOPBACK, **quiet)
            self._started_ray = True
            host = self.ray.get_runtime_context().gcs_address.rpartition(":")[0]
            if host != LOOPBACK:  # never an instance on the network by default: refused, not started
                self.ray.shutdown()
                self._started_ray = False
                raise ConnectionError(f"the local Ray instance would listen on {host}, not {LOOPBACK} alone: not "
                                      "started (Ray has no authentication); name a cluster with --ray ADDRESS")
        else:
            _reachable(address)
            self.ray.init(address=address, **{k: v for k, v in quiet.items() if k != "include_dashboard"})
        self._started_ray = True

    def _placement(self, num_cpus: int | None) -> Placement:
        resources = self.ray.cluster_resources()
        gpus = 0 if self.config.force_cpu else int(resources.get("GPU", 0))
        cpus = max(1, min(int(resources.get("CPU", 1)), num_cpus or int(resources.get("CPU", 1))))
        for name, amount in self.resources.items():  # as many actors as the nodes with them can hold
            room = int(resources.get(name, 0) // amount) if amount > 0 else cpus
            if room < 1:
                raise ValueError(f"no node of the Ray cluster has the resource {name!r} ({amount} per actor)")
            gpus, cpus = min(gpus, room), min(cpus, room)
        return Placement(gpus=gpus, cpus=cpus)

    def _new_actor(self):
        shape = {"num_gpus": 1, "num_cpus": 0} if self.placement.gpus else {"num_cpus": 1}
        if self.resources:
            shape["resources"] = self.resources
        config = {"arch": self.config.arch, "force_cpu": self.config.force_cpu}
        # two calls at once: a cancel reaches the actor while its run streams
        return self._actor_class.options(max_restarts=0, max_task_retries=0, max_concurrency=2, **shape).remote(
            config, self.fresh_each_run, *self.limits)

    def ship(self, job: Job) -> tuple[dict[str, Any] | None, str]:
        """The job's shipment (its workspace in Ray's store, once per version), or why it has none."""
        with self._shipping:
            shipments, refused, bundles = self.shipper.ship([job])
        if self.on_shipped is not None and bundles:
            self.on_shipped(bundles)
        return shipments.get(job.run_id), refused.get(job.run_id, "")

    def replace(self, dead):
        """A fresh actor in place of ``dead`` (None: none), or None when the cluster has no room for one."""
        if dead is not None:
            self.ray.kill(dead, no_restart=True)
        try:
            actor = self._new_actor()
            self.ray.get(actor.ran_on.remote(), timeout=120)
        except Exception:  # no node can host it any more: the other runners carry on
            return None
        return actor

    def close(self) -> None:
        """End every actor (and so its worker), and Ray itself when this pool started it."""
        actors = self.actors
        closing = [actor.close.remote() for actor in actors]
        try:
            if closing:
                self.ray.wait(closing, num_returns=len(closing), timeout=30)
        finally:
            for actor in actors:
                self.ray.kill(actor, no_restart=True)
            for runner in self.runners:
                runner.actor = None
            if self._started_ray:
                self.ray.shutdown()
                self._started_ray = False



# HTTP/2's client preface and an empty SETTINGS frame: what a gRPC client (Ray's GCS and Ray
# Client both speak gRPC) sends first; a gRPC server answers with a SETTINGS frame of its own.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


def _reachable(address: str, timeout_s: float = 5.0, answer_s: float = 3.0) -> None:
    """Fail within seconds, naming what was found, when no Ray answers there: nothing listening,
    or a server that does not speak gRPC (Ray itself retries such an address for minutes)."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as conn:
            answer = _first_answer(conn, answer_s)
    except ValueError:
        raise ValueError(f"{address!r} is not a Ray address (auto, ray://host:port or host:port)") from None
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {host}:{port} ({exc})") from None
    if len(answer) >= 9 and answer[3] == _H2_SETTINGS:
        return
    found = f"it answered {answer[:80]!r}" if answer else f"it accepted the connection but said nothing in {answer_s:g} s"
    raise ConnectionError(f"what listens at {host}:{port} is not Ray (Ray answers in gRPC): {found}")


def _first_answer(conn: socket.socket, timeout_s: float) -> bytes:
    """What a server says to a gRPC client's first bytes, within ``timeout_s``; b"" for silence."""
    conn.settimeout(timeout_s)
    try:
        conn.sendall(_H2_PREFACE)
        return conn.recv(256)
    except (TimeoutError, ConnectionResetError):
        return b""
