"""Importing user files inside the warm worker, one version at a time.

Each run imports the kernel from the exact text that was hashed (a later save cannot slip in
between), under a fresh module name, with the file's real path so tracebacks and the DSLs
(which read a function's source) all point at the user's file. After the run every
module loaded from the workspace is dropped, so the next version sees edited helpers too.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import linecache
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, ContextManager, Iterator

if TYPE_CHECKING:
    from ktui.protocol.job import Job


def _prime_linecache(path: str, source: str) -> None:
    # An mtime of None tells linecache.checkcache to keep this entry: inspect.getsource then
    # returns the hashed text even if the file changes on disk meanwhile.
    lines = source.splitlines(keepends=True)
    linecache.cache[path] = (len(source), None, lines, path)


def load_module(name: str, path: str, source: str | None = None) -> types.ModuleType:
    """Execute ``source`` (default: the file's text) as module ``name`` with ``__file__ = path``.

    What a DSL needs set while the body runs is its adapter's (``Dsl.importing``), entered around this."""
    if source is None:
        source = Path(path).read_text(encoding="utf-8")
    _prime_linecache(path, source)
    code = compile(source, path, "exec", dont_inherit=True)
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


class NamedFiles(importlib.abc.MetaPathFinder):
    """Import each of some names from a given file, wherever it lies, with its text taken from
    ``sources`` (path → text) where that holds the file.

    GPU MODE's task.yml ``files:`` assembles a problem from files kept elsewhere (``utils.py``
    from ``../utils.py``) under the names its code imports; this makes those names importable.
    The reference's modules come from the texts the parent hashed before the run: a file rewritten
    on disk during the run is not what the reference imports.
    """

    def __init__(self, files: dict[str, str], sources: dict[str, str] | None = None):
        self.files = files
        self.sources = sources or {}

    def find_spec(self, fullname, path=None, target=None):
        file = self.files.get(fullname)
        if not file:
            return None
        if file not in self.sources:
            return importlib.util.spec_from_file_location(fullname, file)
        package = Path(file).name == "__init__.py"
        spec = importlib.util.spec_from_loader(fullname, SnapshotLoader(file, self.sources[file]), origin=file,
                                               is_package=package)
        spec.has_location = True  # __file__ is the original path: tracebacks and inspect name the user's file
        if package:
            spec.submodule_search_locations = [str(Path(file).parent)]
        return spec


class SnapshotLoader(importlib.abc.Loader):
    """Executes a module from a text read earlier, under its file's path."""

    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        _prime_linecache(self.path, self.source)
        exec(compile(self.source, self.path, "exec", dont_inherit=True), module.__dict__)


@contextlib.contextmanager
def workspace_imports(root: str, kernel_dir: str, modules: dict[str, str] | None = None,
                      sources: dict[str, str] | None = None) -> Iterator[None]:
    """Let user code import its neighbours (and ``modules``: name → file, their text from
    ``sources`` where it holds them); forget every workspace module afterwards."""
    added = [p for p in (kernel_dir, root) if p not in sys.path]
    sys.path[:0] = added
    modules = dict(modules or {})
    shadowed = {name: sys.modules.pop(name) for name in modules if name in sys.modules}
    finder = NamedFiles(modules, sources)
    if modules:
        sys.meta_path.insert(0, finder)
    before = set(sys.modules)
    root_path = str(Path(root).resolve())
    try:
        yield
    finally:
        for p in added:
            with contextlib.suppress(ValueError):
                sys.path.remove(p)
        if modules:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(finder)
            for name in modules:
                sys.modules.pop(name, None)
            sys.modules.update(shadowed)
        for name in set(sys.modules) - before:
            module = sys.modules.get(name)
            if name.startswith("ktui_user_") or is_workspace_source(getattr(module, "__file__", None), root_path):
                sys.modules.pop(name, None)
        for name in [n for n in sys.modules if n.startswith("ktui_user_")]:
            sys.modules.pop(name, None)


INSTALLED = ("site-packages", "dist-packages")


def is_workspace_source(file: str | None, root: str) -> bool:
    """Whether a module loaded from ``file`` is the workspace's own Python source, to be imported
    afresh by the next version. Not a sibling folder that merely shares the root's name as a
    prefix (``/work/ws-venv`` beside ``/work/ws``), not a package installed in a virtual
    environment kept inside the workspace, and never an extension module: a native library
    (CuTeDSL's MLIR bindings) cannot be loaded twice in one process."""
    if not file or not file.endswith(".py"):
        return False
    path = Path(file)
    if not path.is_relative_to(root):
        return False
    return not any(part in INSTALLED for part in path.relative_to(root).parts)


def job_imports(job: Job) -> ContextManager[None]:
    """What the user code of ``job`` may import — its workspace, its own folder, the problem's
    modules (GPU MODE ``files:``) and the reference's workspace modules, these from the texts the
    parent hashed — the same in the worker and in the target a tool wraps."""
    modules = {**job.reference_modules, **(job.problem.get("modules") or {})}
    return workspace_imports(job.root, str(Path(job.kernel_path).parent), modules, job.reference_files)


def load_reference(job: Job, name: str) -> types.ModuleType:
    """The reference module of ``job``, executed from the text the parent hashed (``Job.reference_files``);
    from the file only for a Job made without that snapshot (a tool's or a test's own)."""
    return load_module(name, job.reference_path, job.reference_files.get(job.reference_path))
