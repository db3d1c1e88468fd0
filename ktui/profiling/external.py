"""Running NVIDIA's process-wrapping tools (``ncu``, ``compute-sanitizer``) around ktui's target.

Shared by ``ktui profile`` and ``ktui sanitize``: find the tool where NVIDIA installs it, resolve
the path and its ``--reference`` and snapshot the kernel as a version (``kernel_for`` and
``Session.prepare``, exactly like ``ktui run``), ask a plain ``python -m ktui.worker.target --mode check``
whether the kernel loads and whether there is a GPU, then run the tool around the target in its
own process group with a time limit — a hung kernel or a hung tool is killed, never waited on.
All of that happens on a ``ToolHost`` (``hosts``): here, or a remote GPU host with ``--remote``.
Nothing here imports torch: the target does that in its own process.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

from ktui.dispatch.proc import child_env
from ktui.dispatch.session import Session
from ktui.measure.gpu_presence import no_gpu_reason
from ktui.measure.tools import ToolFailed
from ktui.profiling.hosts import CannotRun, LocalHost, ToolHost, ToolRun, run_tool
from ktui.profiling.ncu import shape_text
from ktui.protocol.job import Job, Options
from ktui.protocol.processes import READABLE_ENV, describe_exit
from ktui.workspace.kernels import Kernel, ProblemError, kernel_for, state_dir

__all__ = ["CannotRun", "Target", "ToolFailed", "ToolRun", "child_env", "describe_exit", "find", "preflight",
           "prepare", "require_gpu", "require_loaded", "require_visible_gpu", "run_tool", "tool_env"]

PREFLIGHT_TIMEOUT_S = 240.0  # importing torch + triton + the kernel on a cold machine

Progress = Callable[[str], None]


@dataclass
class Target:
    """One version of one kernel, ready to be run by ``python -m ktui.worker.target`` under a tool."""

    kernel: Kernel
    job: Job
    state: Path
    run_dir: Path  # here: where the reports and logs land
    workdir: Path  # private temp folder here
    host: ToolHost = field(default_factory=LocalHost)
    job_file: str = ""  # the job, as the tool's host names it
    tool_dir: str = ""  # a private folder on the tool's host: result files
    tool_run_dir: str = ""  # the run folder on the tool's host: what the tool writes there comes back
    check: dict = field(default_factory=dict)  # what the pre-flight reported

    def argv(self, mode: str, result: str, **flags: object) -> list[str]:
        args = [self.host.python, "-m", "ktui.worker.target", "--job", self.job_file, "--result", result, "--mode", mode]
        for key, value in flags.items():
            if value is not None:
                args += [f"--{key.replace('_', '-')}", str(value)]
        return args

    def on_host(self, name: str) -> str:
        """``name`` in the private folder on the tool's host."""
        return f"{self.tool_dir}/{name}"

    def in_run_dir(self, name: str) -> str:
        """``name`` in the run folder on the tool's host (it comes back with ``host.collect``)."""
        return f"{self.tool_run_dir}/{name}"

    def result(self, path: str) -> dict | None:
        return self.host.read_json(path)

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.host.close()


def tool_env(tool: str) -> dict[str, str]:
    """What the target needs to run under ``tool``: its install folder read (the libraries it
    injects into the process it wraps), beside the job's workspace (``ktui.worker.confine``)."""
    return {READABLE_ENV: str(PurePosixPath(tool).parent)}


def find(host: ToolHost, name: str, env_var: str, patterns: tuple[str, ...], missing: str) -> str:
    """The tool on ``host``; ToolFailed with ``missing`` (naming a remote host) when it is not there."""
    found = host.find(name, env_var, patterns)
    if found is None:
        raise ToolFailed(f"{host.where}: {missing}" if host.remote else missing)
    return found


def prepare(path: Path, options: Options | None = None, reference: Path | None = None,
            host: ToolHost | None = None) -> Target:
    """Resolve ``path`` (and ``--reference``) to a kernel with a reference, as ``ktui run`` does, and
    snapshot it as a version; the job carries its format and modules to the target (``CannotRun`` if not).
    ``host`` (default: here) gets the job and, if remote, the workspace and this ktui."""

    host = host or LocalHost()
    try:
        kernel = kernel_for(Path(path), reference)
    except ProblemError as exc:
        host.close()
        raise CannotRun(str(exc)) from exc
    if kernel.reference is None:
        host.close()
        raise CannotRun(kernel.reference_error)
    session = Session(kernel.root)
    try:
        job = session.prepare(kernel, options or Options())
    finally:
        session.close()
    workdir = Path(tempfile.mkdtemp(prefix="ktui-target-"))
    target = Target(kernel, job, state_dir(kernel.root), Path(job.run_dir), workdir, host)
    try:
        target.job_file, target.tool_dir, target.tool_run_dir = host.stage(job, workdir)
    except BaseException:
        target.close()
        raise
    return target


def preflight(target: Target, shape: int, proton: bool = False, tests: bool = False,
              timeout_s: float = PREFLIGHT_TIMEOUT_S) -> dict:
    """Load the kernel in a plain target process (no tool): the tier, the shape (of the test
    shapes with ``tests``, else the benchmark shapes), load errors, and with ``proton`` what the
    installed Triton offers for in-kernel sections."""
    result_path = target.on_host("check.json")
    argv = (target.argv("check", result_path, shape=shape) + (["--proton"] if proton else [])
            + (["--tests"] if tests else []))
    run = target.host.run(argv, timeout_s)
    result = target.result(result_path)
    if run.timed_out:
        raise ToolFailed(f"loading the kernel took longer than {timeout_s:.0f} s; it was killed")
    if result is None:
        raise ToolFailed(f"the kernel's process died while loading ({describe_exit(run.returncode)}):\n{run.tail()}")
    target.check = result
    return result


def require_gpu(result: dict, what: str, where: str = "here") -> None:
    """Stop on the CPU tier; after ``require_loaded``, the message also says what loaded there, so
    a machine without a GPU still tells whether the kernel is ready for one. ``where``: ``here``
    or ``on HOST``."""
    if result.get("tier") == "gpu":
        return
    loaded = ""
    if result.get("ok"):
        names = ", ".join(result.get("kernels") or []) or "no GPU function"
        kind = str(result.get("shape_set", "")).removesuffix("s")
        shape = shape_text(result["shape"]) if result.get("shape") else "default"
        loaded = f" (it loads {where}: {names}; {kind} shape {shape})"
    advice = "run it on a GPU machine (or --remote HOST)" if where == "here" else "give --remote a GPU host"
    raise ToolFailed(f"no GPU: {what} needs a CUDA GPU and none is visible {where} (CPU tier); {advice}{loaded}")


def require_visible_gpu(host: ToolHost, what: str) -> None:
    """Stop at once, before the seconds of the pre-flight, where this machine surely has no GPU.
    A remote host is asked by its own pre-flight (which also says whether the kernel loads there)."""
    if host.remote:
        return
    reason = no_gpu_reason()
    if reason is not None:
        raise ToolFailed(f"no GPU: {what} needs a CUDA GPU and none is visible here ({reason}); run it on a GPU "
                         "machine (or --remote HOST). `ktui run` checks here that the kernel loads and compiles")


def require_loaded(result: dict) -> None:
    """Stop when the target could not load the kernel (checked before ``require_gpu``)."""
    if result.get("ok"):
        return
    kind = result.get("error_kind")
    if kind in ("shape",):
        raise ToolFailed(result.get("error", "bad shape"))
    raise ToolFailed(f"the kernel could not be loaded: {result.get('error', 'unknown error')}")
