"""Running NVIDIA's process-wrapping tools (``ncu``, ``compute-sanitizer``) around ktui's target.

Shared by ``ktui profile`` and ``ktui sanitize``: find the tool where NVIDIA installs it, resolve
the path and its ``--reference`` and snapshot the kernel as a version (``kernel_for`` and
``Session.prepare``, exactly like ``ktui run``), ask a plain ``python -m ktui.loop.target --mode check``
whether the kernel loads and whether there is a GPU, then run the tool around the target in its
own process group with a time limit — a hung kernel or a hung tool is killed, never waited on.
Nothing here imports torch: the target does that in its own process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ktui.inspect.ncu import shape_text
from ktui.measure.tools import ToolFailed
from ktui.protocol.job import Job, Options
from ktui.protocol.processes import describe_exit
from ktui.run.proc import child_env, end_tree
from ktui.run.session import Session
from ktui.workspace.kernels import Kernel, ProblemError, kernel_for, state_dir

PREFLIGHT_TIMEOUT_S = 240.0  # importing torch + triton + the kernel on a cold machine
TAIL_LINES = 12

Progress = Callable[[str], None]


class CannotRun(Exception):
    """ktui cannot even start (bad path, no reference): exit code 2."""


@dataclass
class ToolRun:
    argv: list[str]
    returncode: int | None
    output: str  # stdout and stderr interleaved, as a person would see them
    timed_out: bool
    duration_s: float

    def tail(self, n: int = TAIL_LINES) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-n:])


def run_tool(argv: list[str], timeout_s: float, env: dict | None = None, cwd: Path | None = None) -> ToolRun:
    """Run ``argv`` in its own process group; on timeout kill the whole group (tool and target)."""
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as out:
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=cwd, start_new_session=True)
        except OSError as exc:
            raise ToolFailed(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            end_tree(proc)
        out.seek(0)
        output = out.read()
    return ToolRun(argv, proc.returncode, output, timed_out, round(time.monotonic() - started, 3))


@dataclass
class Target:
    """One version of one kernel, ready to be run by ``python -m ktui.loop.target`` under a tool."""

    kernel: Kernel
    job: Job
    state: Path
    run_dir: Path
    workdir: Path  # private temp folder for the job and result files
    check: dict = field(default_factory=dict)  # what the pre-flight reported

    def argv(self, mode: str, result: Path, **flags: object) -> list[str]:
        args = [sys.executable, "-m", "ktui.loop.target", "--job", str(self.workdir / "job.json"), "--result", str(result),
                "--mode", mode]
        for key, value in flags.items():
            if value is not None:
                args += [f"--{key.replace('_', '-')}", str(value)]
        return args

    def result(self, path: Path) -> dict | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def prepare(path: Path, options: Options | None = None, reference: Path | None = None) -> Target:
    """Resolve ``path`` (and ``--reference``) to a kernel with a reference, as ``ktui run`` does, and
    snapshot it as a version; the job carries its format and modules to the target (``CannotRun`` if not)."""

    try:
        kernel = kernel_for(Path(path), reference)
    except ProblemError as exc:
        raise CannotRun(str(exc)) from exc
    if kernel.reference is None:
        raise CannotRun(kernel.reference_error)
    session = Session(kernel.root)
    try:
        job = session.prepare(kernel, options or Options())
    finally:
        session.close()
    workdir = Path(tempfile.mkdtemp(prefix="ktui-target-"))
    (workdir / "job.json").write_text(json.dumps(job.to_json()))
    return Target(kernel, job, state_dir(kernel.root), Path(job.run_dir), workdir)


def preflight(target: Target, shape: int, proton: bool = False, tests: bool = False,
              timeout_s: float = PREFLIGHT_TIMEOUT_S) -> dict:
    """Load the kernel in a plain target process (no tool): the tier, the shape (of the test
    shapes with ``tests``, else the benchmark shapes), load errors, and with ``proton`` what the
    installed Triton offers for in-kernel sections."""
    result_path = target.workdir / "check.json"
    argv = (target.argv("check", result_path, shape=shape) + (["--proton"] if proton else [])
            + (["--tests"] if tests else []))
    run = run_tool(argv, timeout_s, env=child_env())
    result = target.result(result_path)
    if run.timed_out:
        raise ToolFailed(f"loading the kernel took longer than {timeout_s:.0f} s; it was killed")
    if result is None:
        raise ToolFailed(f"the kernel's process died while loading ({describe_exit(run.returncode)}):\n{run.tail()}")
    target.check = result
    return result


def require_gpu(result: dict, what: str) -> None:
    """Stop on the CPU tier; after ``require_loaded``, the message also says what loaded here, so
    a machine without a GPU still tells whether the kernel is ready for one."""
    if result.get("tier") == "gpu":
        return
    loaded = ""
    if result.get("ok"):
        names = ", ".join(result.get("kernels") or []) or "no GPU function"
        kind = str(result.get("shape_set", "")).removesuffix("s")
        shape = shape_text(result["shape"]) if result.get("shape") else "default"
        loaded = f" (it loads here: {names}; {kind} shape {shape})"
    raise ToolFailed(f"no GPU: {what} needs a CUDA GPU and none is visible here (CPU tier); "
                     f"run it on a GPU machine{loaded}")


def require_loaded(result: dict) -> None:
    """Stop when the target could not load the kernel (checked before ``require_gpu``)."""
    if result.get("ok"):
        return
    kind = result.get("error_kind")
    if kind in ("shape",):
        raise ToolFailed(result.get("error", "bad shape"))
    raise ToolFailed(f"the kernel could not be loaded: {result.get('error', 'unknown error')}")
