"""The kernel languages ktui knows, as every process may know them: one row per DSL.

The parent reads these rows without the worker or torch (a run's header, the dump kinds of the MCP
``dump`` tool, ``ktui context add``, ``ktui remote check``); the worker imports each row's
``adapter``, its ``ktui.worker.dsl.base.Dsl``, which does the work. Triton, CuTeDSL and TileLang are
built in. Another package adds a DSL with no change to ktui, as Triton's backends are added: its
own row, reached through an entry point of the group ``ktui.dsls`` (``toylang = toylang_ktui:ROW``
in its metadata), in a module that imports neither torch nor the DSL, and its adapter module.
The rows are read once per process, on first use: the CLI's start does not pay for the scan.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINTS = "ktui.dsls"  # the entry-point group a package registers its DSL's row in
CUBIN = ".cubin"  # what every DSL's compile may leave; the dumps rung disassembles it into ``<fn>.sass``


@dataclass(frozen=True)
class ContextCopy:
    """What ``ktui context add <dsl>`` copies of the installed package for agents to read."""

    leave_out: tuple[str, ...] = ()  # top-level folders of the package that are not the DSL (TileLang's TVM)
    licence: bool = False  # the distribution's LICENSE beside the copy (where the package holds none)
    note: str = ""  # what the copy lacks, and which other source has it


@dataclass(frozen=True)
class DslFacts:
    """One DSL as every process knows it; the worker's ``Dsl`` adapter answers the rest."""

    name: str  # "triton": a run's key for its kernels, ``CompiledFunction.dsl``, ``ktui context add`` source
    title: str  # "Triton": how messages name it
    marks: str  # "@triton.jit": how its kernels are marked in a file, as the refusal names them
    figure: str  # "triton_kernels": the pre-checks figure that lists its kernels
    package: str  # "triton": the module a kernel file imports
    distribution: str  # "triton": the installed distribution whose version is reported
    requirement: str  # "triton": what pip installs to get it ("ktui[tilelang]")
    adapter: str  # "ktui.worker.dsl.triton_kernels:TRITON": the worker's ``Dsl``, as module:attribute
    runs_on_cpu: bool  # whether the CPU tier runs its kernels (else it compiles them only: ``compiled``)
    dumps: Mapping[str, str]  # dump kind (the MCP ``dump`` tool's word) → suffix of the text file the dumps rung writes
    noun: str = "kernel(s)"  # what the pre-checks message counts: "2 Triton kernel(s)"
    required: bool = False  # the worker cannot start without it (Triton: its interpreter is the CPU tier)
    context: ContextCopy = field(default_factory=ContextCopy)
    # Its on-disk caches: variable → folder in ktui's compiler caches, the one place of the kind a
    # confined process may write (``ktui.worker.confine.caches``): never the user's own caches.
    caches: Mapping[str, str] = field(default_factory=dict)
    variables: tuple[str, ...] = ()  # prefixes of its variables naming what it runs or loads: read and executed there
    library: tuple[str, ...] = ()  # what a path holds when it is a file of the DSL's own (default: /<package>/)

    def is_library(self, path: str) -> bool:
        """Whether ``path`` (with ``/``) is one of the DSL's own files: its compiled code's lines
        there are its library's (``measure.hotspots``), not the kernel's."""
        return any(mark in path for mark in self.library or (f"/{self.package}/",))

    @property
    def install(self) -> str:
        """What to run when ``package`` is missing."""
        return f"pip install {shlex.quote(self.requirement)}"


TRITON = DslFacts(
    name="triton", title="Triton", marks="@triton.jit", figure="triton_kernels", package="triton",
    distribution="triton", requirement="triton", adapter="ktui.worker.dsl.triton_kernels:TRITON",
    runs_on_cpu=True,  # in Triton's interpreter, on CPU tensors
    dumps={"ttir": ".ttir", "ttgir": ".ttgir", "llir": ".llir", "ptx": ".ptx", "sass": ".sass"},
    required=True,
    context=ContextCopy(note="the Triton wheel ships no tutorials: `ktui context add triton-tutorials` fetches them"),
    caches={"TRITON_HOME": "triton",  # Triton's ~: its .triton/ for anything not named below
            "TRITON_CACHE_DIR": "triton/cache",  # compiled kernels, and the launcher module it dlopens
            "TRITON_DUMP_DIR": "triton/dump", "TRITON_OVERRIDE_DIR": "triton/override"},
    variables=("TRITON_",),
)
CUTEDSL = DslFacts(
    name="cutedsl", title="CuTeDSL", marks="@cute.jit/@cute.kernel", figure="cute_functions", package="cutlass",
    distribution="nvidia-cutlass-dsl", requirement="nvidia-cutlass-dsl", adapter="ktui.worker.dsl.cutedsl:CUTEDSL",
    runs_on_cpu=False, dumps={"mlir": ".mlir", "ptx": ".ptx", "sass": ".sass"}, noun="function(s)",
    context=ContextCopy(licence=True,
                        note="the wheel ships no examples or docs: `ktui context add cutlass` fetches them"),
    caches={"CUTE_DSL_CACHE_DIR": "cutedsl"}, variables=("CUTE_DSL_",), library=("cutlass", "/cute/"),
)
TILELANG = DslFacts(
    name="tilelang", title="TileLang", marks="@tilelang.jit", figure="tilelang_kernels", package="tilelang",
    distribution="tilelang", requirement="ktui[tilelang]", adapter="ktui.worker.dsl.tilelang_kernels:TILELANG",
    runs_on_cpu=False, dumps={"tir": ".tir", "cuda": ".cu", "ptx": ".ptx", "sass": ".sass"},
    context=ContextCopy(leave_out=("3rdparty",)),  # its copy of TVM (60 MB) is not TileLang's API
    caches={"TILELANG_CACHE_DIR": "tilelang",
            "TVM_FFI_CACHE_DIR": "tvm-ffi",  # TileLang's FFI: the torch DLPack extension it builds and dlopens
            "KTUI_TILELANG_BUILDS": "tilelang-builds"},  # ktui's own builds of its CUDA sources (dsl/tilelang_nvcc.py)
    variables=("TL_", "TVM_", "TILELANG_"),
)
BUILT_IN: tuple[DslFacts, ...] = (TRITON, CUTEDSL, TILELANG)


class DslError(Exception):
    """A package's DSL row could not be read: the message names the package and the entry point."""


@functools.cache
def dsls() -> tuple[DslFacts, ...]:
    """Every DSL this installation knows, the built-in ones first: the one table."""
    import importlib.metadata  # here, not at the top: the scan is paid by the commands that read the table

    found = list(BUILT_IN)
    for entry in sorted(importlib.metadata.entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        where = f"the DSL {entry.name!r} ({ENTRY_POINTS} entry point {entry.value!r} of {_owner(entry)})"
        try:
            row = entry.load()
        except Exception as exc:
            raise DslError(f"{where} cannot be loaded: {type(exc).__name__}: {exc}") from exc
        if not isinstance(row, DslFacts):
            raise DslError(f"{where} is a {type(row).__name__}, not a ktui.protocol.dsls.DslFacts")
        taken = next((d for d in found if d.name == row.name or d.figure == row.figure), None)
        if taken is not None:
            raise DslError(f"{where} names itself {row.name!r} with figure {row.figure!r}, as {taken.title} does")
        found.append(row)
    return tuple(found)


def by_name(name: str) -> DslFacts | None:
    return next((d for d in dsls() if d.name == name), None)


def dump_kinds() -> dict[str, str]:
    """Every DSL's dump kinds, each once: kind → the suffix of its files."""
    return {kind: suffix for d in dsls() for kind, suffix in d.dumps.items()}


def dump_suffixes() -> frozenset[str]:
    """The suffixes of every file a dumps rung may write for a compiled function (a re-run replaces them)."""
    return frozenset({CUBIN, *dump_kinds().values()})


def compile_only_titles(figures: Mapping[str, object]) -> str:
    """"CuTeDSL/TileLang": the DSLs of a run's pre-checks ``figures`` (their lists of kernels) that the
    CPU tier only compiles."""
    return "/".join(d.title for d in dsls() if not d.runs_on_cpu and figures.get(d.figure))


def _owner(entry: EntryPoint) -> str:
    dist = getattr(entry, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an unnamed distribution"
