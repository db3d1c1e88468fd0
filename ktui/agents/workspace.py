"""The one workspace a server answers for: paths inside it, kernels by path or by name.

An agent names a kernel as it sees it in the workspace (``kernels/add_triton.py``) or by its id
(``add_triton``). Anything that resolves outside the workspace root is refused, symlinks
included, so a tool call cannot reach files the user did not hand to the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

from ktui.protocol.statedir import runs_of
from ktui.workspace.kernels import Kernel, ProblemError, find_root, kernel_for, state_dir

MAX_PATH_CHARS = 4096  # PATH_MAX: no file an agent names is longer


class BadCall(ToolError):
    """A tool call ktui cannot answer as asked: the message says what to send instead.

    A ``ToolError``, so the client gets it as an error result with this text (any other
    exception is reported as a crash whose text stays in the server).
    """


@dataclass(frozen=True)
class AgentWorkspace:
    root: Path

    @classmethod
    def at(cls, path: Path) -> AgentWorkspace:
        """The workspace around ``path`` (a folder holding references/ or kernels/)."""
        return cls(find_root(Path(path)))

    @property
    def state(self) -> Path:
        return state_dir(self.root)

    def inside(self, given: str) -> Path:
        """``given`` (relative to the root, or absolute) resolved; BadCall if it leaves the workspace."""
        if not isinstance(given, str) or not given.strip():
            raise BadCall("a path must be a non-empty string, relative to the workspace root")
        if "\0" in given:
            raise BadCall(f"{given[:200]!r}: a path cannot hold a NUL byte")
        if len(given) > MAX_PATH_CHARS:
            raise BadCall(f"a path of {len(given)} characters is too long (at most {MAX_PATH_CHARS})")
        raw = Path(given.strip()).expanduser()
        try:
            path = (raw if raw.is_absolute() else self.root / raw).resolve()
            path.exists()  # a name past the file system's limit fails here, not later
        except OSError as exc:
            raise BadCall(f"{given[:200]!r}: not a usable path ({exc.strerror or exc})") from None
        if any(len(part.encode()) > 255 for part in path.parts):
            raise BadCall(f"{given[:200]!r}: a file name in it is too long (at most 255 bytes)")
        if not path.is_relative_to(self.root):
            raise BadCall(f"{given}: outside the workspace {self.root}; name files under it")
        return path

    def kernel(self, name: str) -> Kernel:
        """A kernel by path (``kernels/x.py``) or by id (``x``), resolved as ``ktui run`` resolves it."""
        path = self.inside(name)
        if not path.exists() and path.suffix != ".py":
            by_id = self.inside(f"kernels/{name.strip()}.py")
            if not by_id.is_file():
                raise BadCall(f"{name.strip()}: no such kernel (neither {self.relative(path)} nor "
                              f"{self.relative(by_id)} exists; the kernels tool lists them)")
            path = by_id
        try:
            kernel = kernel_for(path)
        except ProblemError as exc:
            raise BadCall(str(exc)) from None
        return kernel

    def kernel_id(self, name: str) -> str:
        """The id a kernel's results are stored under; a kernel whose file is gone keeps its id."""
        try:
            return self.kernel(name).id
        except BadCall:
            candidate = name.strip().removesuffix(".py").removeprefix("kernels/")
            if not candidate or candidate.startswith("/") or ".." in Path(candidate).parts:
                raise
            if runs_of(self.state, candidate).is_dir():
                return candidate
            raise

    def relative(self, path: str | Path) -> str:
        """``path`` as the agent should write it: relative to the root where it lies inside it."""
        p = Path(path)
        return p.relative_to(self.root).as_posix() if p.is_absolute() and p.is_relative_to(self.root) else str(p)
