"""What a watched folder holds, and which kernels a saved file affects.

The watch loop's middle step: the watcher says "this file changed", this module says "so these
kernels must run" — every kernel whose ``Kernel.files`` (itself, its reference, its problem's
dependencies such as a GPU MODE ``task.yml``) include the file. Kernels are found by
``ktui.workspace.kernels.discover``, as ``ktui run`` finds them, in any format (native workspace, a GPU MODE
problem folder, KernelBench pairs); nothing is imported. A workspace that is empty, half-made or
full of broken files is described, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ktui.workspace import formats as detect
from ktui.workspace.kernels import Kernel, ProblemError, discover, find_root, kernel_at, left_out, named_path


@dataclass(frozen=True)
class Workspace:
    """``root`` holds the state (``.ktui/``); ``target`` is what ``ktui watch`` was given."""

    root: Path
    target: Path
    folders: tuple[Path, ...]  # watched recursively
    gpumode: bool = False

    @classmethod
    def at(cls, path: Path) -> Workspace:
        """``ktui watch DIR``: DIR may be the workspace root, its ``kernels/``, a folder inside it,
        or a GPU MODE problem folder."""
        given, path = path, Path(path).resolve()
        if not path.exists():
            if path.name == "kernels" and (path.parent / "references").is_dir():  # before kernels/ exists
                return cls.native(path.parent, path)
            raise ProblemError(f"{given}: no such folder (ktui watch takes a workspace, its kernels/ folder or a "
                               "folder of kernels; `ktui init DIR` creates a workspace)")
        if not path.is_dir():
            raise ProblemError(f"{path}: not a folder (ktui watch takes the workspace or its kernels/ folder)")
        problem_dir = detect.gpumode_problem_dir(path)
        if problem_dir is not None:
            return cls(root=problem_dir, target=path, folders=(problem_dir,), gpumode=True)
        if (path / "kernels").is_dir() or (path / "references").is_dir():
            return cls.native(path, path / "kernels")
        try:
            root = find_root(path)
        except ProblemError:
            return cls.native(path, path / "kernels")  # an empty folder: say what to create
        return cls.native(root, path)

    @classmethod
    def native(cls, root: Path, kernels: Path) -> Workspace:
        return cls(root=root, target=kernels, folders=(kernels, root / "references"))

    def watch_folders(self) -> list[Path]:
        """``folders``, plus the folders of references and dependencies that lie outside them
        (a KernelBench ``REFERENCE = "kb/model.py"``, a task.yml's shared module)."""
        folders = list(self.folders)
        for kernel in self.kernels():
            for f in kernel.files:
                f = f.resolve()
                if not any(f.is_relative_to(folder) for folder in folders):
                    folders.append(f.parent)
        return folders

    @property
    def references_dir(self) -> Path:
        return self.root / "references"

    def kernels(self) -> list[Kernel]:
        """Every kernel under ``target`` (as ``ktui run`` would find them) kept in this workspace's state."""
        if not self.target.is_dir():
            return []
        try:
            found = discover([self.target], root=None if self.gpumode else self.root)
        except (ProblemError, OSError):
            return []
        return sorted((k for k in found if k.root == self.root), key=lambda k: k.id)

    def kernel(self, path: Path) -> Kernel | None:
        try:
            kernel = kernel_at(Path(path), None if self.gpumode else self.root)
        except (ProblemError, OSError):
            return None
        return kernel if kernel.root == self.root else None

    def is_reference_file(self, path: Path) -> bool:
        return Path(path).is_relative_to(self.references_dir)

    def affected_by(self, path: Path, kernels: list[Kernel] | None = None) -> list[Kernel]:
        """The kernels a change of ``path`` makes stale: those whose files include it. A new
        reference can also resolve kernels that had none, so those count too."""
        path = Path(path).resolve()
        unresolved_too = self.is_reference_file(path)
        return [k for k in (self.kernels() if kernels is None else kernels)
                if path in {f.resolve() for f in k.files} or (unresolved_too and k.reference is None)]

    def problem(self) -> str:
        """Why there is nothing (or not everything) to run, in words for the screen; "" when all is well."""
        if not self.target.is_dir():
            return (f"no {self.target.name}/ folder in {self._rel(self.target.parent)}: create "
                    f"{self._rel(self.target)}/<op>_<name>.py (see ktui init); it is picked up when it appears")
        skipped = "; ".join(left_out([self.target]))
        if not self.kernels():
            return f"{self._rel(self.target)}/ holds no kernel files yet: save one and it runs" + (
                f" ({skipped})" if skipped else "")
        if not self.gpumode and not self.references_dir.is_dir():
            return (f"no references/ folder in {self._rel(self.root)}: kernels cannot be judged until "
                    f"references/<op>.py exists")
        return skipped

    @staticmethod
    def _rel(path: Path) -> str:
        try:
            return str(path.relative_to(Path.cwd())) or "."
        except ValueError:
            return str(path)


class KernelIndex:
    """The workspace's kernels, kept current save by save.

    Finding every kernel reads and parses every file; on each save that would cost the time a
    user waits to see "running". A save of a known kernel file re-reads that one file; anything
    else (a new file, a reference, a task.yml) re-scans the workspace. Used from one thread.
    """

    def __init__(self, workspace: Workspace):
        self.workspace = workspace
        self._by_path: dict[Path, Kernel] = {}
        self.rescan()

    def rescan(self) -> list[Kernel]:
        self._by_path = {k.path: k for k in self.workspace.kernels()}
        return self.kernels()

    def kernels(self) -> list[Kernel]:
        return sorted(self._by_path.values(), key=lambda k: k.id)

    def affected_by(self, path: Path) -> list[Kernel]:
        path = named_path(path)  # a symlinked kernel is known by its link
        if path not in self._by_path:
            return self.workspace.affected_by(path, self.rescan())
        kernel = self.workspace.kernel(path) if path.is_file() else None
        if kernel is None:
            del self._by_path[path]
            return []
        self._by_path[path] = kernel  # its REFERENCE line may have changed
        return self.workspace.affected_by(path, self.kernels())
