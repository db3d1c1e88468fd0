"""The flags several commands share, defined once, and what they parse into (``Options``, the
benchmark settings, the worker's config), so ``ktui run`` and ``ktui watch`` cannot drift apart."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

# ``--timeout`` means one thing in every command: a time limit in seconds, past which that piece of
# work is stopped and reported as timed out. The loop's commands (run, watch, mcp) limit each rung
# (RUNG=SECONDS); the others limit their one kind of step (SECONDS).
TIMEOUT_HELP = ("time limit in seconds for one rung, as RUNG=SECONDS, e.g. --timeout correctness=30 "
                "(repeatable; default: each rung's own limit, 30-120 s)")

# The kernel a command is about, as every command that takes one names it.
KERNEL_PATH_HELP = "the kernel file, e.g. kernels/add_triton.py"

# ``ktui run`` flag → BenchSettings field.
BENCH_FLAGS = {
    "hot_cache": "hot_cache", "cuda_graph": "cuda_graph", "bench_time": "time_s", "warmup": "warmup_s",
    "rse_target": "rse_target", "min_samples": "min_samples", "input_sets": "input_sets", "flush": "flush",
    "roofline_done": "roofline_done",
}


def add_reference(parser: argparse.ArgumentParser) -> None:
    """``--reference``, one meaning for every command that takes a kernel path (see ``kernel_for``)."""
    parser.add_argument("--reference", type=Path, default=None, metavar="PROBLEM.py",
                        help="judge the kernel(s) named against this reference (a KernelBench problem file, "
                             "a GPU MODE reference.py or a ktui reference), as `ktui run --reference` does")


def add_state_dir(parser: argparse.ArgumentParser) -> None:
    """``--state-dir DIR``: ktui's state (history, run folders, reports) kept in DIR instead of the
    workspace's ``.ktui/`` (a read-only workspace); read by ``use_state_dir``."""
    parser.add_argument("--state-dir", type=Path, default=None, metavar="DIR",
                        help="keep the history, run folders and reports in DIR instead of the workspace's .ktui/")


def use_state_dir(args: argparse.Namespace) -> None:
    """Make ``--state-dir`` the state folder of this process and of the ktui processes it starts."""
    if getattr(args, "state_dir", None) is not None:
        from ktui.protocol.statedir import STATE_DIR_ENV  # deferred for start-up speed

        os.environ[STATE_DIR_ENV] = str(args.state_dir.resolve())


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """``--arch`` and ``--cpu``: where the worker runs (read by ``worker_config``)."""
    parser.add_argument("--arch", default=None, help="target architecture without a local GPU (default sm_90a)")
    parser.add_argument("--cpu", action="store_true", help="use the CPU tier even where a GPU exists")


def add_network_flag(parser: argparse.ArgumentParser) -> None:
    """``--allow-network``: the kernels under test may use the network (read by ``worker_config``
    and ``loop_options``); closed otherwise (docs/sandbox.md)."""
    parser.add_argument("--allow-network", action="store_true",
                        help="let the kernels under test use the network (closed otherwise: docs/sandbox.md)")


def add_timeout_flag(parser: argparse.ArgumentParser) -> None:
    """``--timeout RUNG=SECONDS``, repeatable (read by ``parse_timeouts``)."""
    parser.add_argument("--timeout", action="append", metavar="RUNG=SECONDS", help=TIMEOUT_HELP)


def add_step_timeout(parser: argparse.ArgumentParser, step: str, default: float | None, shown: str) -> None:
    """``--timeout SECONDS`` for a command outside the loop: the same meaning as the loop's, for its
    one kind of ``step`` (``shown``: the default as said, also where the limit lives in a module
    that the parser should not import)."""
    parser.add_argument("--timeout", type=float, default=default, metavar="SECONDS",
                        help=f"time limit in seconds for {step} (default {shown})")


def add_kernel_path(parser: argparse.ArgumentParser) -> None:
    """The ``path`` of the one kernel a command is about."""
    parser.add_argument("path", type=Path, help=KERNEL_PATH_HELP)


def add_loop_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of a run of the loop (read by ``loop_options``); each command adds its own ``--strict``."""
    add_target_flags(parser)
    add_network_flag(parser)
    parser.add_argument("--no-bench", action="store_true", help="skip the benchmark rungs")
    parser.add_argument("--seed", type=int, default=None, help="base seed (default: fresh seeds every run)")
    parser.add_argument("--fresh-shapes", type=_count, default=2, metavar="N",
                        help="check each version on N shapes derived from TESTS that it was never shown (default 2)")
    parser.add_argument("--no-fresh-shapes", action="store_true", help="skip the fresh-shapes rung (--fresh-shapes 0)")
    add_timeout_flag(parser)


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a count of shapes (0 or more), got {value!r}")
    return number


class RayAddress(argparse.Action):
    """``--ray``'s optional address: a value that is not one (``--ray kernels/a.py``) is a path."""

    def __call__(self, parser, namespace, value, option_string=None):
        if value is not None and not _looks_like_ray_address(value):
            namespace.ray_paths = [*getattr(namespace, "ray_paths", []), Path(value)]
            value = None
        setattr(namespace, self.dest, value or "local")


def _looks_like_ray_address(value: str) -> bool:
    if Path(value).exists():
        return False
    return value in ("local", "auto") or value.startswith("ray://") or re.fullmatch(r"[\w.-]+:\d+", value) is not None


def add_ray_flag(parser: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]``: the run queue's runners are Ray actors, one per GPU (``ktui.dispatch.ray_pool``)."""
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS", action=RayAddress,
                        help="run the kernels in parallel on Ray, one warm worker per GPU (per CPU on the CPU tier): "
                             "a local Ray instance, or join a cluster with ADDRESS (auto, ray://host:port); "
                             "before a single PATH write --ray local PATH or PATH --ray")


def add_bench_flags(parser: argparse.ArgumentParser) -> None:
    """How the benchmark rung times, one flag per ``BENCH_FLAGS`` entry (read by ``bench_settings``)."""
    bench = parser.add_argument_group("benchmark (GPU tier)")
    bench.add_argument("--hot-cache", action="store_true",
                       help="time with inputs in L2: no flush between samples, one input set")
    bench.add_argument("--cuda-graph", action="store_true",
                       help="also time CUDA-graph replays (no launch overhead), reported as graph_* figures")
    bench.add_argument("--bench-time", type=float, metavar="S", help="cap on sampling time per shape (default 3)")
    bench.add_argument("--warmup", type=float, metavar="S", help="warm-up time per shape (default 0.2)")
    bench.add_argument("--rse-target", type=float, metavar="F",
                       help="stop when each median's relative standard error is below F (default 0.005 = 0.5%%)")
    bench.add_argument("--min-samples", type=int, metavar="N", help="samples per callable before any stop (default 20)")
    bench.add_argument("--input-sets", type=int, metavar="N", help="input sets rotated between samples (default 3)")
    bench.add_argument("--flush", choices=("read", "write"), help="how the L2 is evicted between samples (default read)")
    bench.add_argument("--roofline-done", type=float, metavar="F",
                       help="fraction of its attainable time every benchmark shape must reach for "
                            "'satisfied' (default: the reference's ROOFLINE_DONE, else 0.9)")


def parse_timeouts(values: list[str] | None) -> dict[str, float]:
    out = {}
    for value in values or []:
        name, _, seconds = value.partition("=")
        try:
            out[name.strip()] = float(seconds)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--timeout expects RUNG=SECONDS, got {value!r}") from None
    return out


def bench_settings(args: argparse.Namespace) -> dict:
    """The benchmark flags that were given, as ``Options.bench`` (none for a command without them);
    validated here so a bad value stops ``ktui run`` before any worker starts (ValueError with the
    flag's meaning)."""
    from ktui.protocol.job import BenchSettings  # deferred for start-up speed

    given = {field: getattr(args, flag, None) for flag, field in BENCH_FLAGS.items()
             if getattr(args, flag, None) not in (None, False)}
    BenchSettings.from_dict(given)
    return given


def loop_options(args: argparse.Namespace):
    """The ``Options`` of a run from ``add_loop_flags``' flags, ``--strict`` and any ``add_bench_flags``;
    a bad ``--timeout`` raises ArgumentTypeError, a bad benchmark flag ValueError."""
    from ktui.protocol.job import Options  # deferred for start-up speed

    timeouts = parse_timeouts(args.timeout)
    fresh_shapes = 0 if args.no_fresh_shapes else args.fresh_shapes
    return Options(arch=args.arch, force_cpu=args.cpu, benchmark=not args.no_bench, seed=args.seed,
                   fresh_shapes=fresh_shapes, timeouts=timeouts, strict=args.strict, bench=bench_settings(args),
                   allow_network=args.allow_network)


def worker_config(args: argparse.Namespace):
    """The worker's ``WorkerConfig`` from ``add_target_flags``' flags (none: the defaults); ValueError,
    in one line, for a session's bad ``KTUI_COMPILE_AHEAD``."""
    from ktui.dispatch.runner import WorkerConfig  # deferred for start-up speed
    from ktui.protocol.processes import COMPILE_AHEAD_ENV, compile_ahead_helpers

    if getattr(args, "session", False):
        compile_ahead_helpers(os.environ.get(COMPILE_AHEAD_ENV))
    return WorkerConfig(arch=getattr(args, "arch", None), force_cpu=getattr(args, "cpu", False),
                        compile_ahead=getattr(args, "session", False),
                        allow_network=getattr(args, "allow_network", False))


REMOTE_PYTHON_HELP = "the remote's Python, with torch and Triton (default python3)"
REMOTE_HELP = ("run the worker on HOST through the system's ssh (keys only); the workspace is synced "
               "to DIR (default ~/.ktui-remote) before each run")


def add_remote_flags(parser: argparse.ArgumentParser, help_text: str = REMOTE_HELP) -> None:
    """``--remote`` and how ssh reaches it (read by ``runner_for`` and ``tool_host_for``)."""
    remote = parser.add_argument_group("remote GPU (over ssh)")
    remote.add_argument("--remote", default=None, metavar="[USER@]HOST[:PORT][:/DIR]", help=help_text)
    remote.add_argument("--ssh-config", default=None, metavar="FILE",
                        help="an ssh config file used instead of ~/.ssh/config (default: $KTUI_SSH_CONFIG)")
    remote.add_argument("--remote-python", default="python3", metavar="PYTHON", help=REMOTE_PYTHON_HELP)


def add_gpus_flag(parser: argparse.ArgumentParser) -> None:
    """``--gpus 0,1``: the GPUs of this host to run on, one warm worker each (read by ``runner_for``)."""
    parser.add_argument("--gpus", default=None, metavar="LIST",
                        help="GPUs of this host to run on, one worker per GPU and different kernels in parallel, "
                             "e.g. --gpus 0,1 (default: every visible GPU)")


def placement(args: argparse.Namespace) -> str:
    """Where ``runner_for`` puts the runs, in words (``ktui.dispatch.owner.placement_words``)."""
    from ktui.dispatch.owner import placement_words  # deferred for start-up speed

    return placement_words(getattr(args, "remote", None), getattr(args, "gpus", None), getattr(args, "cpu", False),
                           getattr(args, "cold", False), getattr(args, "ray", None))


def check_placement(args: argparse.Namespace) -> None:
    """ValueError, in one line, for flags that name two placements at once (``--ray``, ``--remote``
    and ``--gpus`` each say where the runs go)."""
    ray, remote, gpus = (getattr(args, name, None) for name in ("ray", "remote", "gpus"))
    if ray is not None and gpus is not None:
        raise ValueError("--gpus picks GPUs of this host: with --ray, Ray places the runs (one worker per GPU it has)")
    if ray is not None and remote is not None:
        raise ValueError("--remote runs on one host over ssh: with --ray, Ray places the runs")
    if gpus is not None and remote is not None:
        raise ValueError("--gpus picks GPUs of this host: it cannot be combined with --remote")


def runner_for(args: argparse.Namespace, fresh_each_run: bool = False, root: Path | None = None):
    """Where the runs happen, for every command that runs kernels (run, serve, watch, mcp): a
    ``RayPool`` with ``--ray``, a ``RemoteRunner`` with ``--remote``, a ``DevicePool`` where several
    GPUs are picked or visible, else a ``LocalRunner``. ValueError, in one line, for two placements
    at once, a bad address or ``--gpus`` list, Ray not installed, or no Ray cluster answering.
    Its runners are ``runners_of`` it; ``close_placement`` ends what it holds besides them."""
    check_placement(args)
    if getattr(args, "ray", None) is not None:
        return ray_pool(args, fresh_each_run)
    if getattr(args, "remote", None) is None:
        return local_runner(args, fresh_each_run, root)
    from ktui.dispatch.remote.address import parse_remote  # deferred for start-up speed
    from ktui.dispatch.remote.runner import RemoteRunner

    return RemoteRunner(parse_remote(args.remote), worker_config(args), fresh_each_run=fresh_each_run,
                        ssh_config=args.ssh_config, python=args.remote_python, root=root)


def ray_pool(args: argparse.Namespace, fresh_each_run: bool = False):
    """The ``RayPool`` that ``--ray`` asks for: one actor per GPU of the cluster (per CPU on the
    CPU tier), each a runner of the run queue; ValueError saying why there is none."""
    from ktui.dispatch.ray_pool import RayMissing, RayPool  # deferred: Ray is an optional extra

    config = worker_config(args)  # its own ValueError says what is wrong, not "could not join"
    try:
        return RayPool(args.ray, config, fresh_each_run=fresh_each_run)
    except RayMissing as exc:
        raise ValueError(str(exc)) from None
    except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster at that address
        raise ValueError(f"could not join the Ray cluster at {args.ray}: {exc}") from None


def runners_of(runner) -> list:
    """The run queue's runners of a placement (``runner_for``): one per GPU (per Ray actor), or the one."""
    return list(runner.runners) if hasattr(runner, "runners") else [runner]


def close_placement(args: argparse.Namespace, runner) -> None:
    """End what a placement holds besides its runners, once the run queue has closed those: a Ray
    pool's actors, and Ray itself when the pool started it (the others hold nothing more)."""
    if getattr(args, "ray", None) is not None and runner is not None:
        runner.close()


def one_folder(args: argparse.Namespace, name: str = "dir") -> None:
    """``--ray FOLDER`` for a command of one folder (watch, serve, mcp): the path ``RayAddress``
    took for an address is that folder (``ktui watch --ray kernels/``); ValueError where another
    folder was named too."""
    paths = getattr(args, "ray_paths", None) or []
    if not paths:
        return
    given = getattr(args, name)
    if len(paths) > 1 or given != Path("."):
        named = " and ".join(str(p) for p in ([] if given == Path(".") else [given]) + paths)
        raise ValueError(f"one folder at a time, not {named}")
    setattr(args, name, paths[0])


def local_runner(args: argparse.Namespace, fresh_each_run: bool = False, root: Path | None = None):
    """One warm worker per GPU where several are picked (``--gpus``) or visible; otherwise one
    worker as always, its runs recorded on the one GPU where it is known. ``--cpu`` without
    ``--gpus`` looks for no GPU; ``--cpu --gpus 0,1`` runs a CPU-tier worker per entry. With the
    workspace's ``root``, its workers may write its run folders, and read it, from their start."""
    import dataclasses

    from ktui.dispatch.gpus import visible_devices  # deferred for start-up speed
    from ktui.dispatch.runner import LocalRunner

    config = worker_config(args)
    if root is not None:
        from ktui.protocol.statedir import runs_folder

        config = dataclasses.replace(config, writable=(str(runs_folder(root)),), readable=(str(root),))
    gpus = getattr(args, "gpus", None)
    devices = [] if (config.force_cpu and gpus is None) else visible_devices(gpus)
    if len(devices) > 1:
        from ktui.dispatch.pool import DevicePool  # deferred for start-up speed

        return DevicePool(devices, config, fresh_each_run=fresh_each_run)
    if devices:
        config = dataclasses.replace(config, gpu=devices[0].index, gpu_uuid=devices[0].uuid, pin_gpu=gpus is not None)
    return LocalRunner(config, fresh_each_run=fresh_each_run)


def tool_host_for(args: argparse.Namespace):
    """Where ``ktui profile`` / ``ktui sanitize`` run their tool: a ``RemoteHost`` with ``--remote``
    (the runner's link and sync), else None (here); ValueError for a bad address."""
    if getattr(args, "remote", None) is None:
        return None
    from ktui.profiling.hosts import RemoteHost  # deferred for start-up speed

    return RemoteHost(runner_for(args))
