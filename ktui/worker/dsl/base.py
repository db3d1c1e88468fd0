"""The one interface the rungs call, whatever language a module's kernels are written in (worker side).

Shaped like ``worker/formats/base.py``: everything a DSL does differently — how its kernels are
found, how its compiles are captured, how its launches are counted or made no-ops, where its
compile errors point — lives in its subclass (``triton_kernels.TRITON``, ``cutedsl.CUTEDSL``,
``tilelang_kernels.TILELANG``), registered in ``registry.DSLS``. The rungs never name a DSL.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ContextManager, Iterable, Iterator

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


class Dsl:
    name = ""  # ``CompiledFunction.dsl`` and the key of ``RunContext.kernels``
    title = ""  # how messages name it: "Triton"
    marks = ""  # how its kernels are marked in a file, as the refusal names them: "@triton.jit"
    figure = ""  # the pre-checks figure that lists its kernels
    noun = "kernel(s)"  # what the pre-checks message counts: "2 Triton kernel(s)"
    package = ""  # the module a kernel file imports
    install = ""  # what to run when ``package`` is missing
    runs_on_cpu = False  # whether the CPU tier runs its kernels (else: compiled ahead of time only)
    compiles_ahead = False  # whether ``compiling_only`` exists: helper processes may build its shapes ahead

    def configure(self, arch: str) -> None:
        """Target ``arch`` and set the DSL's process-wide options; called before the DSL is imported."""

    def prepare(self) -> None:
        """Process-wide set-up that needs the DSL imported: called once a module using it is (the
        pre-checks), before any of its kernels compiles."""

    def find(self, module: ModuleType) -> dict[str, Any]:
        """``{name: kernel}`` for the kernels defined in ``module`` itself (imported ones are not its own)."""
        raise NotImplementedError

    def capture(self, ctx: Any) -> Capture:
        """Record every compile while active; on the CPU tier a launch after a compile raises
        ``LaunchSkipped`` (or is only recorded, where recording is all a compile needs)."""
        raise NotImplementedError

    def counting(self, kernels: dict[str, Any], received: Any, execute: bool) -> ContextManager[list[int]]:
        """Count launches of ``kernels`` into the yielded ``[n]`` and add what each was handed to
        ``received`` (provenance); with ``execute=False`` a launch does nothing (the dependence rung)."""
        raise NotImplementedError

    def compiling_only(self, kernels: dict[str, Any]) -> ContextManager:
        """While active, a launch of ``kernels`` compiles its specialisation into the DSL's on-disk
        cache and runs nothing (``ktui.worker.ahead``: another process then finds it built)."""
        raise NotImplementedError

    def call_scope(self, is_gpu: bool) -> ContextManager:
        """What a call of the user's code runs under (Triton's interpreter on the CPU tier)."""
        return contextlib.nullcontext()

    def is_compile_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` (or what it was raised from) is this DSL's compiler refusing the kernel."""
        return False

    def unmasked(self, kernels: dict[str, Any], snapshot: Any, kernel_path: str) -> dict[str, list[str]]:
        """Per access (``load``, ``store``), the kernels' lines that read or write without a mask
        (``measure/masks.py``), for the DSLs whose source says; ``snapshot`` is the run's copy of the file."""
        return {}

    def place(self, exc: BaseException, user_files: set[str], modules: Iterable[ModuleType]) -> Placed | None:
        """This DSL's compile error in ``exc`` put at the user's line (``user_files`` resolved paths,
        ``modules`` the kernel's modules); None when ``exc`` is not one."""
        return None


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it was raised from, outermost first (``__cause__``, else ``__context__``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
