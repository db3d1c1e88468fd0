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
    """``--arch`` and ``--cpu``: where the worker runs (read by ``placement_of``)."""
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
    """``--ray [ADDRESS]``: the run queue's runners are Ray actors, one per GPU (``ktui.dispatch.ray.pool``)."""
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


REMOTE_PYTHON_HELP = "the remote's Python, with torch and Triton (default python3)"
REMOTE_HELP = ("run the worker on HOST through the system's ssh (keys only); the workspace is synced "
               "to DIR (default ~/.ktui-remote) before each run")


def add_remote_flags(parser: argparse.ArgumentParser, help_text: str = REMOTE_HELP) -> None:
    """``--remote`` and how ssh reaches it (read by ``placement_of`` and ``tool_host_for``)."""
    remote = parser.add_argument_group("remote GPU (over ssh)")
    remote.add_argument("--remote", default=None, metavar="[USER@]HOST[:PORT][:/DIR]", help=help_text)
    remote.add_argument("--ssh-config", default=None, metavar="FILE",
                        help="an ssh config file used instead of ~/.ssh/config (default: $KTUI_SSH_CONFIG)")
    remote.add_argument("--remote-python", default="python3", metavar="PYTHON", help=REMOTE_PYTHON_HELP)


def add_gpus_flag(parser: argparse.ArgumentParser) -> None:
    """``--gpus 0,1``: the GPUs of this host to run on, one warm worker each (read by ``placement_of``)."""
    parser.add_argument("--gpus", default=None, metavar="LIST",
                        help="GPUs of this host to run on, one worker per GPU and different kernels in parallel, "
                             "e.g. --gpus 0,1 (default: every visible GPU)")


def placement_of(args: argparse.Namespace):
    """Where this command's runs happen (``ktui.dispatch.placement.Placement``), from whichever of
    ``--gpus``, ``--remote``, ``--ray``, ``--cpu``, ``--arch`` and ``--cold`` it has; ValueError, in
    one line, for two placements at once."""
    from ktui.dispatch.placement import Placement  # deferred for start-up speed

    return Placement(gpus=getattr(args, "gpus", None), remote=getattr(args, "remote", None),
                     ssh_config=getattr(args, "ssh_config", None),
                     remote_python=getattr(args, "remote_python", None) or "python3",
                     ray=getattr(args, "ray", None), cpu=getattr(args, "cpu", False), arch=getattr(args, "arch", None),
                     cold=getattr(args, "cold", False))


def add_daemon_flag(parser: argparse.ArgumentParser) -> None:
    """``--no-daemon``: run on this command's own worker, not the workspace's daemon (read by ``daemon_wanted``)."""
    parser.add_argument("--no-daemon", action="store_true",
                        help="run on a worker of this command's own, which ends with it, instead of the workspace's "
                             "daemon (also KTUI_NO_DAEMON=1; `ktui serve --status` shows the daemon)")


def daemon_wanted(args: argparse.Namespace) -> bool:
    """Whether this command goes through the workspace's daemon (``ktui.dispatch.daemon.wanted``)."""
    from ktui.dispatch.daemon import wanted  # deferred for start-up speed

    return wanted(getattr(args, "no_daemon", False))


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


def tool_host_for(args: argparse.Namespace):
    """Where ``ktui profile`` / ``ktui sanitize`` run their tool: a ``RemoteHost`` with ``--remote``
    (the runner's link and sync), else None (here); ValueError for a bad address."""
    if getattr(args, "remote", None) is None:
        return None
    from ktui.dispatch.placement import place  # deferred for start-up speed
    from ktui.profiling.hosts import RemoteHost

    return RemoteHost(place(placement_of(args)).runner)
