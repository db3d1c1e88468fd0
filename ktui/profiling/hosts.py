"""Where ``ktui profile`` and ``ktui sanitize`` run their tool: this machine, or a remote GPU host.

The tool flow (``external``, ``profile``, ``sanitize``) is written once against a ``ToolHost``:
find a tool there, run a command there in a process group of its own with a time limit, read a
result file from there. ``LocalHost`` does it here; ``RemoteHost`` does it through a
``RemoteRunner`` — the same multiplexed ssh connection and workspace sync as ``ktui run --remote``
— and, when the tool is done, copies the remote run folder into the local one, so the reports and
logs land in ``.ktui/runs/<kernel>/<version>/`` exactly where a local run puts them. Commands are
argv lists: no path or name is ever read by a shell.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ktui.dispatch.proc import child_env, end_tree
from ktui.dispatch.remote.agent import MARK_END, TOOL_MARK
from ktui.dispatch.remote.link import LinkDown
from ktui.measure.tools import ToolFailed, find_tool
from ktui.protocol.job import Job

if TYPE_CHECKING:
    from ktui.dispatch.remote.runner import RemoteRunner, Staged

GRACE_S = 120.0  # beyond a tool's own limit: the ssh round trips and the copy of its output

FIND_TOOL = r"""
import sys
from ktui.measure.tools import find_tool
print(find_tool(sys.argv[1], sys.argv[2] or None, tuple(sys.argv[3:])) or "")
"""


TAIL_LINES = 12


class CannotRun(Exception):
    """ktui cannot even start (bad path, no reference, the remote out of reach): exit code 2."""


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


class LocalHost:
    """This machine: the tool and the target run here, in the local run folder."""

    where = "here"
    remote = False
    progress_suffix = ""  # what a progress line adds to say where: nothing, here

    def stage(self, job: Job, workdir: Path) -> tuple[str, str, str]:
        """(the job file, a private folder, the run folder) as the tool's host names them."""
        (workdir / "job.json").write_text(json.dumps(job.to_json()))
        return str(workdir / "job.json"), str(workdir), job.run_dir

    @property
    def python(self) -> str:
        return sys.executable

    def find(self, name: str, env_var: str, patterns: tuple[str, ...]) -> str | None:
        return find_tool(name, env_var, patterns)

    def run(self, argv: list[str], timeout_s: float, extra_env: dict | None = None) -> ToolRun:
        return run_tool(argv, timeout_s, env=child_env(extra_env))

    def read_json(self, path: str) -> dict | None:
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return None

    def local_text(self, text: str) -> str:
        return text

    def collect(self) -> None:
        """The tool's files are already where they belong."""

    def close(self) -> None:
        pass


class RemoteHost:
    """A remote GPU host behind a ``RemoteRunner``: its link, its sync, its folders."""

    remote = True

    def __init__(self, runner: RemoteRunner):
        self.runner = runner
        self.where = f"on {runner.host}"
        self.progress_suffix = f" {self.where}"
        self._staged: Staged | None = None
        self._local_run = ""
        self._workdir = ""

    def _fail(self, exc: Exception) -> CannotRun:
        return CannotRun(f"{self.runner.host}: {exc}")

    def stage(self, job: Job, workdir: Path) -> tuple[str, str, str]:
        try:
            self._staged = self.runner.stage(job)
            self._local_run = job.run_dir
            self._workdir = f"{self._staged.base}/tools/{job.run_id}"
            path = f"{self._workdir}/job.json"
            self.runner.link.run_shell(f"mkdir -p -- {shlex.quote(self._workdir)} && cat > {shlex.quote(path)}",
                                       input=json.dumps(self._staged.job.to_json()).encode())
        except (LinkDown, RuntimeError, ValueError, OSError) as exc:
            raise self._fail(exc) from exc
        return path, self._workdir, self._staged.remote_run

    @property
    def python(self) -> str:
        return self.runner.python

    def _base(self) -> str:
        assert self._staged is not None, "stage() first"
        return self._staged.base

    def find(self, name: str, env_var: str, patterns: tuple[str, ...]) -> str | None:
        done = self._call([*self.runner.python_command(self._base()), "-c", FIND_TOOL, name, env_var, *patterns])
        if done.returncode != 0:
            raise self._fail(RuntimeError(f"looking for {name} failed: {_last(done.stderr)}"))
        return done.stdout.decode(errors="replace").strip() or None

    def run(self, argv: list[str], timeout_s: float, extra_env: dict | None = None) -> ToolRun:
        """``argv`` on the remote, in the synced workspace, through the agent's ``tool`` verb: the
        limit is kept there, and the tool's group ends with the ssh session if the link drops."""
        base = self._base()
        env = [f"{key}={value}" for key, value in (extra_env or {}).items()]
        command = [*self.runner.agent_command(base), "tool", f"{timeout_s:g}", *env, "--", *argv]
        script = f"cd {shlex.quote(base + '/ws')} && exec {shlex.join(command)}"
        started = time.monotonic()
        done = self._call(None, script=script, timeout=timeout_s + GRACE_S)
        said = done.stderr.decode(errors="replace")
        head, mark, tail = said.rpartition(TOOL_MARK)
        if not mark:
            raise self._fail(RuntimeError(f"{Path(argv[0]).name} did not run there: {_last(done.stderr)}"))
        status = json.loads(tail.split(MARK_END, 1)[0])
        if status.get("error"):
            raise self._fail(RuntimeError(status["error"]))
        output = self.local_text(done.stdout.decode(errors="replace") + head)
        return ToolRun(argv, status["returncode"], output, bool(status["timed_out"]),
                       round(time.monotonic() - started, 3))

    def read_json(self, path: str) -> dict | None:
        done = self._call(["cat", "--", path])
        if done.returncode != 0:
            return None
        try:
            return json.loads(self.local_text(done.stdout.decode()))
        except ValueError:
            return None

    def local_text(self, text: str) -> str:
        """The remote's paths in ``text`` as the local ones (the tool's messages name our files)."""
        return self._staged.back.text(text) if self._staged else text

    def collect(self) -> None:
        """The remote run folder (reports, logs, dumps) into the local one."""
        if self._staged is None:
            return
        try:
            self.runner.fetch_run(self._staged, self._local_run)
        except (LinkDown, RuntimeError, OSError) as exc:
            raise self._fail(RuntimeError(f"the run folder did not come back: {exc}")) from exc

    def close(self) -> None:
        try:
            if self._workdir:
                self.runner.link.run(["rm", "-rf", "--", self._workdir], check=False)
        except (LinkDown, RuntimeError, OSError):  # a link that is down leaves a small folder, never a process
            pass
        finally:
            self.runner.close()

    def _call(self, remote: list[str] | None, script: str = "", timeout: float = 120.0) -> subprocess.CompletedProcess:
        try:
            if remote is None:
                return self.runner.link.run_shell(script, timeout=timeout, check=False)
            return self.runner.link.run(remote, timeout=timeout, check=False)
        except LinkDown as exc:
            raise self._fail(exc) from exc


ToolHost = LocalHost | RemoteHost


def _last(data: bytes) -> str:
    lines = [line for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
