"""Finding kernels and their references on disk, without importing either.

The contract: ``<root>/references/<op>.py`` is the trusted side; ``<root>/kernels/<name>.py`` is a
candidate that names its reference with ``REFERENCE = "<op>"``, or else by its file stem up to the
first ``_`` (``softmax_triton.py`` → ``softmax``). The root is the nearest folder above a path that
holds ``references/`` (or, failing that, ``kernels/``). This module runs in the process that shows
results, so it reads files as text and parses them with ``ast`` — user code never runs here.

Problems in other formats are found here too (``ktui.workspace.formats`` reads their files): a GPU
MODE problem folder (``reference.py`` + ``task.yml``) is its own root and its kernels are
``submission*.py`` and ``solutions/**``; a KernelBench problem is named by ``REFERENCE = "<path>"``
or ``--reference`` and recognised by its ``class Model`` + ``get_inputs``. ``discover`` is what
``ktui run`` and ``ktui watch`` both call; ``kernel_for`` is how every command that names one kernel
file (``run``, ``profile``, ``sanitize``, ``diff``, ``history``, ``pin``, the dashboard's ``p``) resolves it.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ktui.protocol.sourcelines import parse as parse_python
from ktui.protocol.statedir import STATE_DIR, state_dir  # noqa: F401  (state_dir: used by the parent side)
from ktui.workspace import formats as detect

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
    format: str = detect.NATIVE  # "native" | "gpumode" | "kernelbench"
    problem: dict[str, Any] = field(default_factory=dict, compare=False)  # carried to the worker in the Job
    dependencies: tuple[Path, ...] = ()  # other files whose edit changes the verdict (task.yml, files:)

    @property
    def id(self) -> str:
        """Stable name used for state paths: relative to kernels/ (or the root), no suffix.

        A GPU MODE problem folder is its own root, so its kernels are prefixed with the folder's
        name (``vectoradd/submission``) to stay apart from other problems' ``submission``.
        """
        kernels_dir = self.root / "kernels"
        try:
            rel = self.path.relative_to(kernels_dir)
        except ValueError:
            rel = self.path.relative_to(self.root) if self.path.is_relative_to(self.root) else Path(self.path.name)
        if self.format == detect.GPUMODE and self.problem.get("problem_dir") == str(self.root):
            rel = Path(self.root.name) / rel
        return rel.with_suffix("").as_posix()

    @property
    def files(self) -> tuple[Path, ...]:
        """Every file whose edit should re-run this kernel: itself, its reference, its dependencies."""
        return (self.path, *([self.reference] if self.reference else []), *self.dependencies)

    @property
    def name(self) -> str:
        return self.path.stem


def find_root(path: Path, fallback: Path | None = None) -> Path:
    """The workspace root for ``path``: nearest ancestor with references/, else with kernels/,
    else ``fallback`` (a pair named with ``--reference`` needs no workspace)."""
    path = named_path(path)
    start = path if path.is_dir() else path.parent
    candidates = [start, *start.parents]
    for marker in ("references", "kernels"):
        for folder in candidates:
            if (folder / marker).is_dir():
                return folder
    if fallback is not None:
        return fallback.resolve()
    raise ProblemError(f"{path}: no workspace found: no references/ or kernels/ folder here or above it "
                       "(`ktui init DIR` creates one, with a worked example)")


def content_hash(data: bytes) -> str:
    """A file's version: the first 16 hex digits of the SHA-256 of its bytes."""
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class ReferenceSnapshot:
    """What judges a kernel, read once: the bytes of its reference and of every file the reference
    needs (a GPU MODE task.yml and ``files:``, the workspace modules it imports), in hashing order.

    A run carries these bytes to the worker, which judges with them: a file rewritten on disk
    after this read (by a person, or by the kernel's own code) cannot change the run's verdict."""

    files: dict[Path, bytes]  # the reference first, then what it needs
    modules: dict[str, Path]  # workspace modules the reference imports: import name → file

    @property
    def hash(self) -> str:
        return files_hash(list(self.files.values()))


def files_hash(contents: list[bytes]) -> str:
    """The reference hash of files' contents, the reference's first: the one combination."""
    if not contents:
        return ""
    return content_hash(contents[0] + b"".join(b"\0" + data for data in contents[1:]))


def reference_snapshot(kernel: Kernel) -> ReferenceSnapshot:
    """Read the reference of ``kernel`` and the files it needs, once. Raises OSError when the
    reference cannot be read (a missing dependency counts as empty, as it always has)."""
    if kernel.reference is None:
        return ReferenceSnapshot({}, {})
    files = {kernel.reference: kernel.reference.read_bytes()}
    for dep in kernel.dependencies:
        if dep.is_file() and dep not in files:
            files[dep] = dep.read_bytes()
    searched = [kernel.path.parent, kernel.root]  # where the worker's imports look (``worker/modules.py``)
    named = set((kernel.problem.get("modules") or {}).keys())
    modules = local_imports(files[kernel.reference], searched, kernel.root, named)
    for path in modules.values():
        if path not in files:
            files[path] = path.read_bytes()
    return ReferenceSnapshot(files, modules)


def reference_hash(kernel: Kernel) -> str:
    """The hash of what judges ``kernel``: its reference, and the files the reference needs (a
    GPU MODE task.yml and its ``files:``, the workspace modules it imports). The one definition:
    a run records it, and "is this result still current?" compares against it. Raises OSError
    when the reference cannot be read."""
    return reference_snapshot(kernel).hash


def content_hash_of(path: Path | None) -> str:
    """The content hash of the file at ``path`` as it is now; "" when it cannot be read."""
    try:
        return content_hash(Path(path).read_bytes()) if path is not None else ""
    except OSError:
        return ""


def reference_hash_of(kernel: Kernel) -> str:
    """``reference_hash`` of ``kernel`` as it is now; "" when its reference cannot be read."""
    try:
        return reference_hash(kernel)
    except OSError:
        return ""


def reference_on_disk(paths: list[str]) -> str:
    """The reference hash of the files a snapshot holds, read again now (their order is the hash's);
    a file gone counts as empty."""
    contents = []
    for path in paths:
        try:
            contents.append(Path(path).read_bytes())
        except OSError:
            contents.append(b"")
    return files_hash(contents)


def reference_stat(paths: list[Path]) -> tuple:
    """Whether files were written since: each one's inode, size and modification times (None if gone)."""
    found = []
    for path in paths:
        try:
            st = Path(path).stat()
        except OSError:
            found.append(None)
            continue
        found.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(found)


MAX_LOCAL_MODULES = 200


def local_imports(source: bytes, folders: list[Path], root: Path, skip: set[str] = frozenset()) -> dict[str, Path]:
    """The workspace modules ``source`` imports, and those they import in turn: import name → file.

    Resolved as the worker's imports are (the first of ``folders`` holding the top-level name),
    kept only when inside ``root`` and not an installed package; ``skip``: names served otherwise
    (GPU MODE ``files:``). Text only: nothing is imported."""
    found: dict[str, Path] = {}
    pending = [source]
    root = root.resolve()
    while pending and len(found) < MAX_LOCAL_MODULES:
        for name in _imported_names(pending.pop()):
            for module, path in _resolve_module(name, folders):
                if module in found or module in skip or module.split(".", 1)[0] in skip:
                    continue
                if not path.is_relative_to(root) or any(p in ("site-packages", "dist-packages") for p in path.parts):
                    continue
                found[module] = path
                try:
                    pending.append(path.read_bytes())
                except OSError:
                    continue
    return found


def _imported_names(source: bytes) -> list[str]:
    """Absolute module names an ``import`` or ``from … import`` of ``source`` may load."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
            names.extend(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def _resolve_module(name: str, folders: list[Path]) -> list[tuple[str, Path]]:
    """``a.b.c`` → the files Python would load for ``a``, ``a.b``, ``a.b.c`` from the first folder
    holding ``a`` (a module ``a.py``, a package ``a/__init__.py``, or a plain folder); [] when none does."""
    parts = name.split(".")
    for folder in folders:
        found: list[tuple[str, Path]] = []
        base = folder
        for i, part in enumerate(parts):
            package, module = base / part / "__init__.py", base / f"{part}.py"
            if package.is_file():
                found.append((".".join(parts[: i + 1]), package.resolve()))
                base = base / part
            elif module.is_file():
                found.append((".".join(parts[: i + 1]), module.resolve()))
                break
            elif (base / part).is_dir() and i + 1 < len(parts):
                base = base / part  # a namespace package (a folder without __init__.py): no file of its own
            else:
                break
        if found:
            return found
    return []


def declared_reference(source: str) -> str | None:
    """The string assigned to a top-level ``REFERENCE``, read with ast (None if absent/unparsable)."""
    try:
        tree = parse_python(source)
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
    """Find the reference of kernel ``path``: (path, "") or (None, why not).

    A ``REFERENCE`` that names a file must name a Python file inside the workspace: the reference
    is imported and watched, so a kernel file cannot make ktui run or watch ``/etc/passwd``. A
    reference elsewhere is named on the command line (``--reference``), which is explicit.
    """
    if source is None:
        source = path.read_text(encoding="utf-8", errors="replace")
    declared = declared_reference(source)
    if declared is not None and (declared.endswith(".py") or "/" in declared):
        return _declared_file(root, declared)
    op = declared if declared is not None else path.stem.split("_", 1)[0]
    how = f'REFERENCE = "{declared}"' if declared is not None else f"the file name ({path.stem} → {op})"
    candidate = root / "references" / f"{op}.py"
    if candidate.is_file():
        return _inside(root, candidate, how)
    why = f"no reference for {path.name}: {how} names {candidate.relative_to(root)}, which does not exist"
    known = sorted(p.stem for p in (root / "references").glob("*.py")) if (root / "references").is_dir() else []
    close = difflib.get_close_matches(op, known, n=1, cutoff=0.6)
    return None, why + (f"; did you mean {close[0]}?" if close else "")


def _declared_file(root: Path, declared: str) -> tuple[Path | None, str]:
    """``REFERENCE = "<path>"``, relative to the workspace root and kept inside it."""
    how = f'REFERENCE = "{declared}"'
    candidate, why = _inside(root, root / declared, how)
    if candidate is None:
        return None, why
    shown = candidate.relative_to(root.resolve())
    if not candidate.is_file():
        return None, f"{how} names {shown}, which does not exist"
    if candidate.suffix != ".py":
        return None, f"{how} names {shown}, which is not a Python file"
    return candidate, ""


def _inside(root: Path, named: Path, how: str) -> tuple[Path | None, str]:
    """``named`` with its links followed, refused where it ends outside the workspace: one rule
    whether a kernel names its reference by op or by path, so a symlink cannot carry either out."""
    candidate = named.resolve()
    if candidate.is_relative_to(root.resolve()):
        return candidate, ""
    link = f" ({named.relative_to(root)} is a link to {candidate})" if named.is_symlink() else ""
    return None, (f"{how} names a file outside the workspace {root}{link}: a kernel may only name a reference "
                  f"inside it (name one elsewhere on the command line: `ktui run KERNEL --reference FILE`)")


def named_path(path: Path) -> Path:
    """``path`` made absolute with its folders resolved but not its own name: a symlinked kernel
    is named (and keeps its history) by the link the user made, not by the file it points to."""
    path = Path(path).absolute()
    return path.parent.resolve() / path.name


def name_problem(path: Path) -> str:
    """Why the file at ``path`` cannot be a kernel by its name alone, in one line; "" when it can.

    A path that is not UTF-8 (bytes Python keeps as surrogates) cannot be recorded in the history,
    printed or sent as JSON text, so ktui leaves such a file out and names it with its bytes
    escaped (``bad\\xff.py``) rather than guess a name for it."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        try:
            named = Path(path).relative_to(Path.cwd())
        except (ValueError, OSError):
            named = Path(path)
        shown = os.fsencode(named).decode("utf-8", errors="backslashreplace")
        return f"{shown}: left out: its name is not UTF-8 (rename it to run it)"
    return ""


def left_out(paths: list[Path]) -> list[str]:
    """Why ``discover`` leaves out files under these folders that would be kernels but for their
    name (``name_problem``), one line each, for the surfaces to say."""
    said: list[str] = []
    for raw in paths:
        path = Path(raw).resolve()
        if not path.is_dir():
            continue
        folder = _kernels_folder(path)
        try:
            files = sorted(python_files(folder, raw))
        except ProblemError:
            continue
        said += [why for p in files if is_candidate_file(p.relative_to(folder)) and (why := name_problem(p))]
    return said


def kernel_at(path: Path, root: Path | None = None, reference: Path | None = None) -> Kernel:
    """The kernel at ``path``, its reference and its format.

    ``reference`` (``ktui run --reference``) overrides everything; then a ``REFERENCE = ...`` in the
    file; then the GPU MODE problem folder the file lies in; then the file-name rule.
    """
    path = named_path(path)
    if name_problem(path):
        raise ProblemError(name_problem(path))
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ProblemError(f"{path}: cannot read: {exc.strerror}") from exc
    if reference is not None:
        ref = reference.resolve()
        if not ref.is_file():
            raise ProblemError(f"{reference}: no such reference file")
        return _judged_by(path, root, ref)
    problem_dir = detect.gpumode_problem_dir(path)
    if problem_dir is not None and declared_reference(source) is None:
        return _gpumode_kernel(path, root or problem_dir, problem_dir)
    root = root or find_root(path)
    ref, why = resolve_reference(path, root, source)
    if ref is None:
        return Kernel(path=path, root=root, reference=None, reference_error=why)
    return _judged_by(path, root, ref)


def _judged_by(path: Path, root: Path | None, reference: Path) -> Kernel:
    """``path`` judged by ``reference``; without a ``root``, the one the kernel would have unnamed.

    A kernel inside a GPU MODE problem folder keeps that folder as its root when its own
    ``reference.py`` is named, so ``--reference`` changes neither its name nor its history.
    """
    fmt = detect.reference_format(reference)
    if fmt == detect.GPUMODE:
        problem_dir = reference.parent
        if root is None and path.is_relative_to(problem_dir):
            root = problem_dir
        return _gpumode_kernel(path, root or find_root(path, fallback=path.parent), problem_dir)
    return Kernel(path=path, root=root or find_root(path, fallback=path.parent), reference=reference, format=fmt)


def _gpumode_kernel(path: Path, root: Path, problem_dir: Path) -> Kernel:
    reference = problem_dir / detect.GPUMODE_REFERENCE
    if path == reference:
        raise ProblemError(f"{path}: this is the GPU MODE problem's reference, not a kernel (its kernels are submission*.py)")
    try:
        task = detect.read_task(problem_dir)
    except detect.FormatError as exc:
        return Kernel(path=path, root=root, reference=None, reference_error=str(exc), format=detect.GPUMODE,
                      dependencies=(problem_dir / detect.GPUMODE_TASK,))
    return Kernel(path=path, root=root, reference=reference, format=detect.GPUMODE, problem=task.to_job(),
                  dependencies=task.dependencies)


def is_candidate_file(path: Path) -> bool:
    """Python files that may be kernels: not private, not editor temp/backup files."""
    name = path.name
    return (
        path.suffix == ".py"
        and not name.startswith(("_", ".", "#"))
        and not any(part in SKIP_PARTS for part in path.parts)
    )


def kernel_for(path: Path, reference: Path | None = None, root: Path | None = None) -> Kernel:
    """The one kernel file a command names (with its ``--reference``), resolved as ``ktui run`` does.

    Every command that takes a kernel path goes through here, so its format, its reference, its
    GPU MODE ``files:`` modules, its name and its ``.ktui/`` folder are one answer for all of them.
    """
    raw = Path(path)
    resolved = named_path(raw)
    if not resolved.exists():
        raise ProblemError(f"{raw}: no such file")
    if not resolved.is_file():
        raise ProblemError(f"{raw}: not a file (name one kernel file)")
    if resolved.suffix != ".py":
        raise ProblemError(f"{raw}: not a Python file")
    return kernel_at(resolved, root, reference)


def discover(paths: list[Path], root: Path | None = None, reference: Path | None = None) -> list[Kernel]:
    """Expand files and folders into kernels, in any format.

    A folder that is a workspace root means its kernels/; a GPU MODE problem folder means its
    ``submission*.py`` and ``solutions/**``. In a folder with no workspace above it (a collection of
    GPU MODE problems), the files outside problem folders are their shared modules, not kernels.
    ``reference`` judges every kernel found against that one reference.
    """
    kernels: list[Kernel] = []
    for raw in paths:
        path = raw.resolve()
        if not path.exists():
            raise ProblemError(f"{raw}: no such file or folder")
        if path.is_file():
            kernels.append(kernel_for(raw, reference, root))
            continue
        kernels.extend(_kernels_in_folder(raw, path, root, reference))
    seen: set[Path] = set()
    unique = []
    for k in kernels:
        if k.path not in seen:
            seen.add(k.path)
            unique.append(k)
    return unique


def _kernels_in_folder(raw: Path, path: Path, root: Path | None, reference: Path | None) -> list[Kernel]:
    problem_dir = detect.gpumode_problem_dir(path)
    if problem_dir is not None and reference is None:
        files = [p for p in detect.gpumode_candidates(problem_dir) if p.is_relative_to(path) and not name_problem(p)]
        if not files:
            raise ProblemError(f"{raw}: GPU MODE problem {problem_dir.name} has no submission*.py or solutions/ kernel here")
        return [kernel_at(p, root, reference) for p in files]
    folder = _kernels_folder(path)
    candidates = sorted(p for p in python_files(folder, raw) if is_candidate_file(p.relative_to(folder)))
    files = [p for p in candidates if not name_problem(p)]
    if not files:
        why = "; ".join(name_problem(p) for p in candidates)
        raise ProblemError(f"{raw}: no kernel files (*.py) in {folder}" + (f" ({why})" if why else ""))
    if reference is not None:
        return [kernel_at(p, root, reference) for p in files]
    problems = {p: detect.gpumode_problem_dir(p) for p in files}
    gpumode = [p for p in files if problems[p] is not None and detect.is_gpumode_candidate(problems[p], p)]
    native = [p for p in files if problems[p] is None]
    kernels = [kernel_at(p, root, reference) for p in gpumode]
    if native:
        try:
            folder_root = root or find_root(folder)
        except ProblemError:
            if not gpumode:
                raise
            folder_root = None
        if gpumode:
            # Beside GPU MODE problems, only files under a workspace's kernels/ are kernels; the
            # rest (utils.py, eval.py of a problem collection) are the problems' shared modules.
            native = [p for p in native if folder_root is not None and p.is_relative_to(folder_root / "kernels")]
        kernels.extend(kernel_at(p, folder_root, reference) for p in native)
    if not kernels:
        raise ProblemError(f"{raw}: no kernel files in {folder} (GPU MODE kernels are submission*.py or under solutions/)")
    return kernels


def _kernels_folder(path: Path) -> Path:
    """The folder ``path`` means: a workspace root means its ``kernels/``."""
    return path / "kernels" if (path / "kernels").is_dir() and (path / "references").is_dir() else path


MAX_FOLDERS = 2000  # a workspace is far smaller; more means ``ktui run /tmp`` or ``ktui run ~``
PRUNED_FOLDERS = {"node_modules", "site-packages"}


def python_files(folder: Path, raw: Path | None = None) -> list[Path]:
    """The ``*.py`` files below ``folder`` that may belong to it, found within a bound.

    Kernels run and ``.ktui/`` is written where they are found, so the walk stays in this
    workspace: it does not enter hidden folders, virtual environments or installed packages, nor
    a folder that is a workspace of its own (it holds ``references/`` or ``kernels/``); and past
    ``MAX_FOLDERS`` folders it stops and says so rather than run whatever a home folder holds.
    """
    found: list[Path] = []
    pending = [folder]
    visited = 0
    while pending:
        current = pending.pop()
        visited += 1
        if visited > MAX_FOLDERS:
            raise ProblemError(f"{raw or folder}: more than {MAX_FOLDERS} folders below {folder}; ktui runs "
                               "one workspace: name its root, its kernels/ folder or a kernel file")
        try:
            entries = sorted(current.iterdir())
        except OSError:
            continue  # unreadable: nothing of ours is in there
        for entry in entries:
            if entry.is_dir():
                if not _foreign_folder(entry):
                    pending.append(entry)
            elif entry.suffix == ".py" and entry.is_file():
                found.append(entry)
    return found


def _foreign_folder(folder: Path) -> bool:
    """A folder below the one being searched that holds no kernels of it."""
    name = folder.name
    return (name.startswith(".") or name in SKIP_PARTS or name in PRUNED_FOLDERS
            or (folder / "pyvenv.cfg").is_file()
            or (folder / "references").is_dir() or (folder / "kernels").is_dir())
