"""What a watched folder holds, and which kernels a saved file affects.

The watch loop's middle step: the watcher says "this file changed", this module says "so these
kernels must run" — the file itself when it is a kernel, every kernel judged against it when it is
a reference. Kernels and references are resolved by ``ktui.problem`` (read as text, never
imported). A workspace that is empty, half-made or full of broken files is described, not fatal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ktui.problem import Kernel, ProblemError, find_root, is_candidate_file, kernel_at


@dataclass(frozen=True)
class Workspace:
    """``root`` holds ``references/``; ``kernels_dir`` is the folder whose kernels are watched."""

    root: Path
    kernels_dir: Path

    @classmethod
    def at(cls, path: Path) -> Workspace:
        """``ktui watch DIR``: DIR may be the workspace root, its ``kernels/`` or a folder inside it."""
        path = Path(path).resolve()
        if not path.exists():
            if (path.parent / "references").is_dir():  # ``ktui watch kernels/`` before kernels/ exists
                return cls(root=path.parent, kernels_dir=path)
            raise ProblemError(f"{path}: no such folder")
        if not path.is_dir():
            raise ProblemError(f"{path}: not a folder (ktui watch takes the workspace or its kernels/ folder)")
        if (path / "kernels").is_dir() or (path / "references").is_dir():
            return cls(root=path, kernels_dir=path / "kernels")
        try:
            root = find_root(path)
        except ProblemError:
            return cls(root=path, kernels_dir=path / "kernels")  # an empty folder: say what to create
        return cls(root=root, kernels_dir=path)

    @property
    def references_dir(self) -> Path:
        return self.root / "references"

    @property
    def watched_folders(self) -> list[Path]:
        return [self.kernels_dir, self.references_dir]

    def kernels(self) -> list[Kernel]:
        """Every kernel file under ``kernels_dir``, sorted by path; unreadable ones are left out."""
        if not self.kernels_dir.is_dir():
            return []
        found = []
        for path in sorted(self.kernels_dir.rglob("*.py")):
            if not path.is_file() or not is_candidate_file(path.relative_to(self.kernels_dir)):
                continue
            kernel = self.kernel(path)
            if kernel is not None:
                found.append(kernel)
        return found

    def kernel(self, path: Path) -> Kernel | None:
        try:
            return kernel_at(Path(path), self.root)
        except ProblemError:
            return None

    def is_kernel_file(self, path: Path) -> bool:
        path = Path(path)
        return path.is_relative_to(self.kernels_dir) and is_candidate_file(path.relative_to(self.kernels_dir))

    def is_reference_file(self, path: Path) -> bool:
        return Path(path).is_relative_to(self.references_dir)

    def affected_by(self, path: Path) -> list[Kernel]:
        """The kernels a change of ``path`` makes stale: the kernel itself, or a reference's users."""
        path = Path(path).resolve()
        if self.is_kernel_file(path):
            kernel = self.kernel(path) if path.is_file() else None
            return [kernel] if kernel is not None else []
        if self.is_reference_file(path):
            # A new reference can also resolve kernels that had none, so unresolved kernels count.
            return [k for k in self.kernels() if k.reference == path or k.reference is None]
        return []

    def problem(self) -> str:
        """Why there is nothing to run, in words for the screen; "" when there are kernels."""
        if not self.kernels_dir.is_dir():
            return (f"no kernels/ folder in {self.root}: create {self._rel(self.kernels_dir)}/<op>_<name>.py "
                    "(see ktui's kernels/ for examples); it is picked up when it appears")
        if not self.kernels():
            return f"{self._rel(self.kernels_dir)}/ holds no kernel files yet: save one and it runs"
        if not self.references_dir.is_dir():
            return (f"no references/ folder in {self.root}: kernels cannot be judged until "
                    f"references/<op>.py exists")
        return ""

    def _rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
