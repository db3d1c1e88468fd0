"""The one interface the rungs call, whatever language a module's kernels are written in (worker side).

Shaped like ``worker/formats/base.py``: everything a DSL does differently — how its kernels are
found, how its compiles are captured, how its launches are counted or made no-ops, where its
compile errors point — lives in its subclass (``triton_kernels.TRITON``, ``cutedsl.CUTEDSL``,
``tilelang_kernels.TILELANG``, or another package's), named by its row of ``ktui.protocol.dsls``
and found through it (``registry.DSLS``). The rungs never name a DSL.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar, ContextManager, Iterable, Iterator

from ktui.protocol.dsls import DslFacts
from ktui.protocol.events import SourceLocation
from ktui.worker.outcome import CompiledFunction


class LaunchSkipped(Exception):
    """A kernel compiled on the CPU tier and its launch was skipped: running it needs a GPU."""


@dataclass
class Placed:
    """A compile error as the user reads it: one message, and the line of their file it is about."""

    message: str
    location: SourceLocation | None = None


class Capture:
    """Every compile of one DSL during a block (the compile rung's traced call).

    ``launches`` counts the launches seen; ``compiled()`` gives what was built, after the block."""

    launches = 0

    def __enter__(self) -> Capture:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False

    def compiled(self) -> list[CompiledFunction]:
        return []


class Dsl(abc.ABC):
    """A DSL's adapter: what the rungs ask of a module's kernels, whatever language they are in.

    ``facts`` is its row of ``ktui.protocol.dsls`` (name, title, package, whether the CPU tier runs
    it…), read through the properties below; the abstract methods are what every DSL must answer,
    the others have an answer that suits a DSL without the feature."""

    facts: ClassVar[DslFacts]
    compiles_ahead = False  # whether ``compiling_only`` exists: helper processes may build its shapes ahead
    # Whether one counted launch is one GPU function (Triton, TileLang), so that a profiler's count of
    # kernels can be compared with it; a CuTeDSL host function may launch several.
    one_gpu_function_per_launch = True
    # On the CPU tier, whether what the compile rung builds is a second import of the module under
    # ``importing(interpreted=False)`` (Triton: an interpreted kernel cannot be compiled).
    needs_compilable_import = False

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def title(self) -> str:
        return self.facts.title

    @property
    def marks(self) -> str:
        return self.facts.marks

    @property
    def figure(self) -> str:
        return self.facts.figure

    @property
    def noun(self) -> str:
        return self.facts.noun

    @property
    def package(self) -> str:
        return self.facts.package

    @property
    def install(self) -> str:
        return self.facts.install

    @property
    def runs_on_cpu(self) -> bool:
        return self.facts.runs_on_cpu

    def configure(self, arch: str) -> None:
        """Target ``arch`` and set the DSL's process-wide options; called before user code imports the DSL."""
        return None  # a DSL with no target or options to set

    def prepare(self) -> None:
        """Process-wide set-up that needs the DSL imported: called once a module using it is (the
        pre-checks), before any of its kernels compiles."""
        return None  # a DSL with nothing to set up

    def importing(self, interpreted: bool) -> ContextManager:
        """What a user module is imported under: on the CPU tier (``interpreted``) Triton's
        ``@triton.jit`` makes interpreted kernels while the module body runs."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def find(self, module: ModuleType) -> dict[str, Any]:
        """``{name: kernel}`` for the kernels defined in ``module`` itself (imported ones are not its own)."""

    @abc.abstractmethod
    def capture(self, ctx: Any) -> Capture:
        """Record every compile while active; on the CPU tier a launch after a compile raises
        ``LaunchSkipped`` (or is only recorded, where recording is all a compile needs)."""

    @abc.abstractmethod
    def counting(self, kernels: dict[str, Any], received: Any, execute: bool) -> ContextManager[list[int]]:
        """Count launches of ``kernels`` into the yielded ``[n]`` and add what each was handed to
        ``received`` (provenance); with ``execute=False`` a launch does nothing (the dependence rung)."""

    def compiling_only(self, kernels: dict[str, Any]) -> ContextManager:
        """While active, a launch of ``kernels`` compiles its specialisation into the DSL's on-disk
        cache and runs nothing (``ktui.worker.ahead``: another process then finds it built); only
        where ``compiles_ahead``."""
        raise NotImplementedError(f"{self.title} compiles no shape ahead (compiles_ahead is False)")

    def call_scope(self, is_gpu: bool) -> ContextManager:
        """What a call of the user's code runs under (Triton's interpreter on the CPU tier)."""
        return contextlib.nullcontext()

    @abc.abstractmethod
    def is_compile_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` (or what it was raised from) is this DSL's compiler refusing the kernel."""

    def unmasked(self, kernels: dict[str, Any], snapshot: Any, kernel_path: str) -> dict[str, list[str]]:
        """Per access (``load``, ``store``), the kernels' lines that read or write without a mask
        (``measure/masks.py``), for the DSLs whose source says; ``snapshot`` is the run's copy of the file."""
        return {}

    @abc.abstractmethod
    def place(self, exc: BaseException, user_files: set[str], modules: Iterable[ModuleType]) -> Placed | None:
        """This DSL's compile error in ``exc`` put at the user's line (``user_files`` resolved paths,
        ``modules`` the kernel's modules); None when ``exc`` is not one."""

    def dump_stem(self, compiled: CompiledFunction) -> str:
        """What a compiled function's dump files are named after: the user's Python function (a GPU
        symbol may be mangled with every argument type, or the same for every kernel)."""
        return compiled.source_fn.replace(".", "_")


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from, outermost first (``__cause__``, else ``__context__``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
