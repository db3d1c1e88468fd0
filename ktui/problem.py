"""Finding kernels and their references on disk, without importing either.

The contract: ``<root>/references/<op>.py`` is the trusted side; ``<root>/kernels/<name>.py`` is a
candidate that names its reference with ``REFERENCE = "<op>"``, or else by its file stem up to the
first ``_`` (``softmax_triton.py`` → ``softmax``). The root is the nearest folder above a path that
holds ``references/`` (or, failing that, ``kernels/``). This module runs in the process that shows
results, so it reads files as text and parses them with ``ast`` — user code never runs here.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

STATE_DIR = ".ktui"
SKIP_PARTS = {STATE_DIR, "__pycache__", ".git"}


_REFERENCE_LINE = re.compile(r"""^REFERENCE\s*(?::\s*str\s*)?=\s*(["'])(.+?)\1\s*(?:#.*)?$""", re.MULTILINE)


class ProblemError(Exception):
    """ktui cannot run this path at all (bad path, no reference): exit code 2 territory."""


@dataclass(frozen=True)
class Kernel:
    """A candidate kernel file and the reference it is judged against."""

    path: Path
    root: Path
    reference: Path | None  # None when it cannot be resolved; ``reference_error`` says why
    reference_error: str = ""

    @property
    def id(self) -> str:
        """Stable name used for state paths: relative to kernels/ (or the root), no suffix."""
        kernels_dir = self.root / "kernels"
        try:
            rel = self.path.relative_to(kernels_dir)
        except ValueError:
            rel = self.path.relative_to(self.root) if self.path.is_relative_to(self.root) else Path(self.path.name)
        return rel.with_suffix("").as_posix()

    @property
    def name(self) -> str:
        return self.path.stem


def find_root(path: Path) -> Path:
    """The workspace root for ``path``: nearest ancestor with references/, else with kernels/."""
    path = path.resolve()
    start = path if path.is_dir() else path.parent
    candidates = [start, *start.parents]
    for marker in ("references", "kernels"):
        for folder in candidates:
            if (folder / marker).is_dir():
                return folder
    raise ProblemError(f"{path}: no workspace found (no references/ or kernels/ folder here or above it)")


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def declared_reference(source: str) -> str | None:
    """The string assigned to a top-level ``REFERENCE``, read with ast (None if absent/unparsable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        # A syntax error elsewhere must not lose the reference: read the assignment as text.
        match = _REFERENCE_LINE.search(source)
        return match.group(2) if match else None
    for node in tree.body:
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == "REFERENCE":
                value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    return value.value
    return None


def resolve_reference(path: Path, root: Path, source: str | None = None) -> tuple[Path | None, str]:
    """Find the reference of kernel ``path``: (path, "") or (None, why not)."""
    if source is None:
        source = path.read_text(encoding="utf-8", errors="replace")
    declared = declared_reference(source)
    op = declared if declared is not None else path.stem.split("_", 1)[0]
    how = f'REFERENCE = "{declared}"' if declared is not None else f"the file name ({path.stem} → {op})"
    candidates = [root / "references" / f"{op}.py"]
    if declared is not None and (declared.endswith(".py") or "/" in declared):
        candidates.insert(0, root / declared)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve(), ""
    return None, f"no reference for {path.name}: {how} names {candidates[-1].relative_to(root)}, which does not exist"


def kernel_at(path: Path, root: Path | None = None) -> Kernel:
    path = path.resolve()
    root = root or find_root(path)
    try:
        reference, why = resolve_reference(path, root)
    except OSError as exc:
        raise ProblemError(f"{path}: cannot read: {exc.strerror}") from exc
    return Kernel(path=path, root=root, reference=reference, reference_error=why)


def is_candidate_file(path: Path) -> bool:
    """Python files that may be kernels: not private, not editor temp/backup files."""
    name = path.name
    return (
        path.suffix == ".py"
        and not name.startswith(("_", ".", "#"))
        and not any(part in SKIP_PARTS for part in path.parts)
    )


def discover(paths: list[Path], root: Path | None = None) -> list[Kernel]:
    """Expand files and folders into kernels. A folder that is a workspace root means its kernels/."""
    kernels: list[Kernel] = []
    for raw in paths:
        path = raw.resolve()
        if not path.exists():
            raise ProblemError(f"{raw}: no such file or folder")
        if path.is_file():
            if path.suffix != ".py":
                raise ProblemError(f"{raw}: not a Python file")
            kernels.append(kernel_at(path, root))
            continue
        folder = path / "kernels" if (path / "kernels").is_dir() and (path / "references").is_dir() else path
        files = sorted(p for p in folder.rglob("*.py") if is_candidate_file(p.relative_to(folder)))
        if not files:
            raise ProblemError(f"{raw}: no kernel files (*.py) in {folder}")
        folder_root = root or find_root(folder)
        kernels.extend(kernel_at(p, folder_root) for p in files)
    seen: set[Path] = set()
    unique = []
    for k in kernels:
        if k.path not in seen:
            seen.add(k.path)
            unique.append(k)
    return unique


def state_dir(root: Path) -> Path:
    """``<root>/.ktui``, created on first use with a .gitignore so it never gets committed."""
    state = root / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    ignore = state / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return state
