"""A Ray job's workspace, read on the driver and shipped with the job: no node needs the files.

A node of a cluster does not have the workspace at the driver's paths, or at all. So the driver
reads what a run elsewhere needs — ``ktui.workspace.shipped.run_files``, the one definition that
``--remote`` syncs too (the workspace's files and its calibration), plus any GPU MODE ``files:``
module kept outside the workspace — and puts those bytes in Ray's object store once per
workspace version, keyed by their content hash; each job carries a reference to them. The actor
writes a version into its node's scratch folder the first time one of its jobs needs it
(``ray.files.WorkspaceCopies``) and runs the job there.

What a node could not run is refused here, the reason in the run's result: a file over the size
limit, a reference that is not shipped, and a module-level import of the kernel or its reference
that the driver finds neither among the shipped files nor among its installed modules.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.util
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ktui.dispatch.ray.files import MAX_FILE_BYTES, OUTSIDE, mib
from ktui.protocol.job import Job
from ktui.protocol.sourcelines import parse as parse_python
from ktui.workspace.shipped import job_relocation, moved_job, outside_modules, outside_name, run_files

KEEP_VERSIONS = 8  # workspace versions whose objects the driver keeps in Ray's store
WHO = "a Ray run"
NOT_SHIPPED = "symlinks, hidden folders, caches and virtual environments are not shipped"


class NotShippable(ValueError):
    """A workspace that cannot be shipped to a Ray node; the message says which file and why."""


@dataclass(frozen=True)
class Bundle:
    """One version of a workspace as shipped: its files by name, the hash of their bytes, and the
    files kept outside it (original path → name in ``files``)."""

    root: str
    digest: str
    files: dict[str, bytes] = field(repr=False)
    outside: dict[str, str]

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())


def bundle_of(root: str, jobs: list[Job], max_file_bytes: int = MAX_FILE_BYTES) -> Bundle:
    """The workspace at ``root`` as its ``jobs`` need it, read now; NotShippable when a file is
    over ``max_file_bytes`` or the workspace is too large to send."""
    try:
        names = run_files(Path(root))
    except (ValueError, OSError) as exc:
        raise NotShippable(str(exc)) from None
    outside = {original: f"{OUTSIDE}/{outside_name(original)}" for original in outside_modules(root, [job.problem for job in jobs])}
    paths = {name: Path(root) / name for name in names}
    paths.update((name, Path(original)) for original, name in outside.items())
    files: dict[str, bytes] = {}
    for name, path in paths.items():
        try:
            size = path.stat().st_size
            if size > max_file_bytes:
                raise NotShippable(f"{path} ({mib(size)}) is too large to ship to a Ray node: a workspace file may "
                                   f"be at most {mib(max_file_bytes)}; keep large files out of {root}")
            files[name] = path.read_bytes()
        except OSError as exc:
            raise NotShippable(f"{path} cannot be read to ship it to a Ray node: {exc.strerror or exc}") from None
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0" + str(len(files[name])).encode() + b"\0")
        digest.update(files[name])
    return Bundle(root, digest.hexdigest()[:16], files, outside)


def refusals(job: Job, bundle: Bundle) -> list[str]:
    """Why a Ray node could not run ``job`` from ``bundle`` (nothing when it could)."""
    try:
        data = job.to_json()
        moved_job(data, job_relocation(data, "/shipped", "/run"), WHO)
    except ValueError as exc:
        return [str(exc)]
    reference = _relative(job.reference_path, job.root)
    if job.reference_path and reference not in bundle.files:
        return [f"the reference {job.reference_path} is not among the files a Ray node receives ({NOT_SHIPPED})"]
    found: list[str] = []
    sources = [(job.kernel_path, job.source)]
    if job.reference_path:
        sources.append((job.reference_path, bundle.files[reference].decode("utf-8", errors="replace")))
    named = set(job.problem.get("modules") or {})
    search = [str(Path(job.kernel_path).parent), job.root]  # where the worker looks first (loop/modules.py)
    for path, text in sources:
        for line, name in module_imports(text):
            top = name.partition(".")[0]
            if top in named:
                continue
            why = _unresolved(top, search, job.root, bundle)
            if why:
                found.append(f"{_relative(path, job.root)}:{line} imports {name!r}, {why}")
    return found


def _unresolved(name: str, search: list[str], root: str, bundle: Bundle) -> str:
    """Why a node could not import ``name`` (nothing when it could): a workspace module must be
    shipped, any other must be installed (the driver's installed modules stand for the node's)."""
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, search)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        origins = [spec.origin] if spec.origin and spec.has_location else list(spec.submodule_search_locations or [])
        for origin in origins:
            rel = _relative(origin, root)
            if rel in bundle.files or any(shipped.startswith(rel + "/") for shipped in bundle.files):
                return ""
        return f"which resolves here to {origins[0] if origins else name}, a file a Ray node does not receive ({NOT_SHIPPED})"
    if name in sys.builtin_module_names or name in getattr(sys, "stdlib_module_names", ()):
        return ""
    try:
        installed = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        installed = False
    if installed:
        return ""
    return ("which ktui finds neither among the workspace files a Ray node receives nor among the modules "
            "installed here: a node gets the workspace's files and its own installed packages only")


def module_imports(source: str) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for each import that runs when the file is loaded: module level (in
    ``if``/``with`` blocks too), not inside functions, not under ``if TYPE_CHECKING``, not in a
    ``try`` that handles an ImportError (an optional import), not relative."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return iter(())  # the worker reports the syntax error itself
    return _walk(tree.body)


def _walk(body: list[ast.stmt]) -> Iterator[tuple[int, str]]:
    for node in body:
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _walk(node.body)
            yield from _walk(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            yield from _walk(node.body)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            if not any(_catches_import_error(handler) for handler in node.handlers):
                yield from _walk(node.body)
            for handler in node.handlers:
                yield from _walk(handler.body)
            yield from _walk(node.orelse)
            yield from _walk(node.finalbody)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(kind, ast.Name) and kind.id in {"ImportError", "ModuleNotFoundError", "Exception",
                                                            "BaseException"} for kind in kinds)


def _relative(path: str, root: str) -> str:
    return path[len(root) + 1:] if path.startswith(root + "/") else path


class Shipper:
    """The driver's side: each job's workspace read and put in Ray's store, once per version
    (the object of a version already put is reused, by its content hash)."""

    def __init__(self, ray, max_file_bytes: int = MAX_FILE_BYTES):
        self.ray = ray
        self.max_file_bytes = max_file_bytes
        self.versions: OrderedDict[str, Any] = OrderedDict()  # digest → the object ref of its files

    def ship(self, jobs: list[Job]) -> tuple[dict[str, dict[str, Any]], dict[str, str], list[Bundle]]:
        """For each job, its shipment (what the actor's ``run`` takes) or why it cannot be shipped;
        and the bundles read."""
        by_root: dict[str, list[Job]] = {}
        for job in jobs:
            by_root.setdefault(job.root, []).append(job)
        shipments: dict[str, dict[str, Any]] = {}
        refused: dict[str, str] = {}
        bundles: list[Bundle] = []
        for root, group in by_root.items():
            try:
                bundle = bundle_of(root, group, self.max_file_bytes)
            except NotShippable as exc:
                refused.update((job.run_id, str(exc)) for job in group)
                continue
            bundles.append(bundle)
            ref = self._put(bundle)
            for job in group:
                reasons = refusals(job, bundle)
                if reasons:
                    refused[job.run_id] = "\n".join(reasons)
                else:  # the ref inside a list: Ray hands it over as a ref, fetched only where needed
                    shipments[job.run_id] = {"digest": bundle.digest, "outside": bundle.outside, "files": [ref]}
        return shipments, refused, bundles

    def _put(self, bundle: Bundle):
        ref = self.versions.get(bundle.digest)
        if ref is None:
            ref = self.versions[bundle.digest] = self.ray.put(bundle.files)
        self.versions.move_to_end(bundle.digest)
        while len(self.versions) > KEEP_VERSIONS:
            self.versions.popitem(last=False)  # a job in flight holds its own reference to it
        return ref
