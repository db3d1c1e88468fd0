"""Where a command's runs happen, as one value, and that value made real: the run queue's runners.

Every command that runs kernels (run, serve, watch, mcp) turns its flags into a ``Placement``
(``ktui.cli.options.placement_of``) and hands it on: the workspace's owner compares the one a
caller asks for with its own as values, the daemon is started with it, and ``place`` builds its
runners — a ``RayPool``'s actors with ``--ray``, a ``RemoteRunner`` with ``--remote``, one pinned
``WorkerRunner`` per GPU where several are picked or visible, else one ``WorkerRunner``. A test
gives runners of its own through ``RunnerSource`` (the CLI's ``main(argv, runners=...)``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ktui.dispatch.runner import Runner, WorkerConfig, WorkerRunner
from ktui.protocol.processes import COMPILE_AHEAD_ENV, compile_ahead_helpers
from ktui.protocol.statedir import runs_folder

HERE = "this machine"  # a placement with no flags: a worker of this machine, its default tier


@dataclass(frozen=True)
class Placement:
    """Where runs happen: this machine's default worker unless a field says otherwise."""

    gpus: str | None = None  # --gpus: GPUs of this host, one warm worker each
    remote: str | None = None  # --remote [USER@]HOST[:PORT][:/DIR]: a worker over ssh
    ssh_config: str | None = None  # --ssh-config: how ssh reaches the remote
    remote_python: str = "python3"  # --remote-python
    ray: str | None = None  # --ray [ADDRESS]: one Ray actor per GPU
    cpu: bool = False  # --cpu: the CPU tier even where a GPU exists
    arch: str | None = None  # --arch: the target without a local GPU
    cold: bool = False  # --cold: a fresh worker process for every kernel

    def __post_init__(self) -> None:
        """ValueError, in one line, for two placements at once (``--ray``, ``--remote`` and
        ``--gpus`` each say where the runs go)."""
        if self.ray is not None and self.gpus is not None:
            raise ValueError("--gpus picks GPUs of this host: with --ray, Ray places the runs (one worker per GPU it has)")
        if self.ray is not None and self.remote is not None:
            raise ValueError("--remote runs on one host over ssh: with --ray, Ray places the runs")
        if self.gpus is not None and self.remote is not None:
            raise ValueError("--gpus picks GPUs of this host: it cannot be combined with --remote")

    def words(self) -> str:
        """The placement in words, as a refusal names it: ``GPUs 0,1 (CPU tier)``."""
        where = f"Ray {self.ray}" if self.ray else f"remote {self.remote}" if self.remote else (
            f"GPUs {self.gpus}" if self.gpus else HERE)
        return (where + (f" for {self.arch}" if self.arch else "") + (" (CPU tier)" if self.cpu else "")
                + (" (a fresh worker per kernel)" if self.cold else ""))

    @property
    def this_host(self) -> bool:
        """Runs on this machine's own workers (neither ``--remote`` nor ``--ray``): what a
        workspace's daemon may hold."""
        return self.remote is None and self.ray is None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Placement:
        """The placement a JSON object names; ValueError for a field it does not have or two placements."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"a placement has no field {', '.join(unknown)}")
        return cls(**data)

    def worker_config(self, session: bool = False) -> WorkerConfig:
        """The worker's config; ``session``: a long-lived worker (watch, serve, MCP, the daemon) that
        may keep compile-ahead helpers. ValueError, in one line, for a bad ``KTUI_COMPILE_AHEAD``."""
        if session:
            import os

            compile_ahead_helpers(os.environ.get(COMPILE_AHEAD_ENV))
        return WorkerConfig(arch=self.arch, force_cpu=self.cpu, compile_ahead=session)


# A test's runners for a placement (None: build them as usual): the seam the CLI offers tests.
RunnerSource = Callable[[Placement, "Path | None"], "list[Runner] | None"]


@dataclass
class Placed:
    """A placement made real: the run queue's runners (one per GPU or Ray actor; the queue closes
    them), and what else it holds until ``close`` (a Ray pool's actors, Ray when it started it)."""

    placement: Placement
    runners: list[Runner]
    holder: Any = field(default=None)  # a RayPool; None when the runners are all there is

    @property
    def runner(self) -> Runner:
        return self.runners[0]

    def close(self) -> None:
        if self.holder is not None:
            self.holder.close()


def place(placement: Placement, root: Path | None = None, session: bool = False,
          source: RunnerSource | None = None) -> Placed:
    """The runners of ``placement``; with the workspace's ``root`` its workers may write its run
    folders from their start. ValueError, in one line, for a bad address or ``--gpus`` list, Ray
    not installed, or no Ray cluster answering."""
    given = source(placement, root) if source is not None else None
    if given is not None:
        return Placed(placement, given)
    fresh = placement.cold
    if placement.ray is not None:
        pool = _ray_pool(placement, session)
        return Placed(placement, list(pool.runners), pool)
    if placement.remote is not None:
        from ktui.dispatch.remote.address import parse_remote  # deferred: ssh only when asked for
        from ktui.dispatch.remote.runner import RemoteRunner

        return Placed(placement, [RemoteRunner(parse_remote(placement.remote), placement.worker_config(session),
                                               fresh_each_run=fresh, ssh_config=placement.ssh_config,
                                               python=placement.remote_python, root=root)])
    return Placed(placement, _local(placement, root, session))


def _local(placement: Placement, root: Path | None, session: bool) -> list[Runner]:
    """One warm worker per GPU where several are picked (``--gpus``) or visible; otherwise one
    worker as always, its runs recorded on the one GPU where it is known. ``--cpu`` without
    ``--gpus`` looks for no GPU; ``--cpu --gpus 0,1`` runs a CPU-tier worker per entry."""
    from ktui.dispatch.gpus import visible_devices  # deferred: it may ask nvidia-smi

    config = placement.worker_config(session)
    if root is not None:  # its workers may write its run folders, and read it, from their start
        config = dataclasses.replace(config, writable=(str(runs_folder(root)),), readable=(str(root),))
    devices = [] if (config.force_cpu and placement.gpus is None) else visible_devices(placement.gpus)
    if len(devices) > 1:
        from ktui.dispatch.pool import DevicePool

        return list(DevicePool(devices, config, fresh_each_run=placement.cold).runners)
    if devices:
        config = dataclasses.replace(config, gpu=devices[0].index, gpu_uuid=devices[0].uuid,
                                     pin_gpu=placement.gpus is not None)
    return [WorkerRunner(config, fresh_each_run=placement.cold)]


def _ray_pool(placement: Placement, session: bool):
    """The ``RayPool`` that ``--ray`` asks for: one actor per GPU of the cluster (per CPU on the
    CPU tier), each a runner of the run queue; ValueError saying why there is none."""
    from ktui.dispatch.ray.pool import RayMissing, RayPool  # deferred: Ray is an optional extra

    config = placement.worker_config(session)  # its own ValueError says what is wrong, not "could not join"
    try:
        return RayPool(placement.ray, config, fresh_each_run=placement.cold)
    except RayMissing as exc:
        raise ValueError(str(exc)) from None
    except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster at that address
        raise ValueError(f"could not join the Ray cluster at {placement.ray}: {exc}") from None


def reached(placed: Placed) -> str | None:
    """A ``--remote`` host is reached once before any kernel: why not, in one line (its runner
    then closed), or None when it answered or there is no host to reach."""
    return placed.runner.reach()
