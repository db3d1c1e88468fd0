"""Triton kernels of a user module: find them, record their launches, compile them ahead of time.

The specialisation a Triton kernel is compiled with (argument types, which integers are
divisible by 16, constexpr values) depends on the arguments of a real launch. So ktui records
the launches made while ``custom_kernel`` runs on the first test input and compiles exactly
those. On a GPU the launch itself compiled the kernel and we keep the object that ran; on the
CPU tier the launch ran in Triton's interpreter and we compile the recorded specialisation for
the target architecture with ``triton.compile`` and an explicit ``GPUTarget``.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Iterator

import triton
from triton import knobs
from triton.runtime.jit import JITFunction, KernelInterface

from ktui.measure.masks import FIGURES, unmasked_lines
from ktui.protocol import dsls
from ktui.protocol.events import SourceLocation
from ktui.protocol.sourcelines import location
from ktui.worker.dsl import compiler_errors
from ktui.worker.dsl.base import Capture, Dsl, Placed, chain
from ktui.worker.outcome import CompiledFunction
from ktui.worker.provenance import inside_launch

try:  # only present when the interpreter is importable (always, in supported versions)
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # pragma: no cover
    InterpretedFunction = ()  # type: ignore[assignment]
try:  # how Triton's interpreter reports a device function's failure, which a library twin keeps
    from triton.runtime.errors import InterpreterError
except ImportError:  # pragma: no cover
    InterpreterError = None  # type: ignore[assignment,misc]


_interpreted: dict[int, Any] = {}


def _language_patched(langs: list) -> bool:
    """Whether each of the ``triton.language`` modules ``langs`` already runs on the interpreter.

    Triton's interpreter patches the language (its builtins become calls of the interpreter's
    semantic) at a launch and again at every device-function call, and a call's patches stay
    until the launch ends; ``program_id`` is one of the builtins every patch replaces.
    """
    import triton.language as tl

    return bool(langs) and not any(tl.core.is_builtin(getattr(lang, "program_id", None)) for lang in langs)


if InterpreterError is not None:
    class LibraryTwin(InterpretedFunction):  # type: ignore[misc,valid-type]
        """The interpreted twin of a standard-library ``@jit`` function (``tl.max``, ``tl.sum``…).

        Triton's own ``InterpretedFunction`` patches the language on every call — an
        ``inspect.getmembers`` walk of ``triton.language`` — which was half of an interpreted
        softmax's time (eight library calls per program). Within a launch the patches are already
        in place, so a twin patches only when they are not; the call itself is Triton's.
        """

        def __init__(self, fn: Any) -> None:
            import triton.language as tl

            super().__init__(fn)
            self.langs = [value for value in fn.__globals__.values() if value is tl or value is tl.core]

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if not _language_patched(self.langs):
                return super().__call__(*args, **kwargs)
            fn = self.rewrite()
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                raise InterpreterError(repr(e)) from e
else:  # pragma: no cover - a Triton without the per-call patch: its own class is the twin
    LibraryTwin = InterpretedFunction


@contextlib.contextmanager
def interpreter_environment() -> Iterator[None]:
    """Run Triton's interpreter in a process that imported Triton in compiled mode.

    Triton picks interpreted or compiled at import time, for its own standard library too
    (``tl.max``, ``tl.sum``… are ``@jit`` functions). The worker needs both: compiled to build
    sm_90a code, interpreted to run kernels on CPU tensors. While this context is active, the
    standard library's JITFunctions are swapped for interpreted twins and the interpreter knob
    is on; afterwards everything is put back.
    """
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("triton.language") and m is not None]
    classes = {
        id(v): v
        for m in modules
        for v in list(vars(m).values())
        if isinstance(v, type) and getattr(v, "__module__", "").startswith("triton.language")
    }
    owners: list[Any] = [*modules, *classes.values()]
    # The interpreter patches the language in place and does not always undo it (a nested
    # device-function call leaves its patches behind), so snapshot everything it may touch.
    snapshot = [(owner, dict(vars(owner))) for owner in owners]
    import triton.language as tl

    for owner in [*modules, tl.core.tensor]:  # tensor methods like x.sum() are @jit functions too
        for attr, value in list(vars(owner).items()):
            if type(value) is JITFunction:
                twin = _interpreted.get(id(value))
                if twin is None:
                    twin = _interpreted[id(value)] = LibraryTwin(value.fn)
                setattr(owner, attr, twin)
    proton_saved = _silence_proton_scopes()
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        for attr, value in proton_saved.items():
            setattr(sys.modules["triton.profiler.language"], attr, value)
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
        for owner, before in snapshot:
            now = vars(owner)
            for attr, value in before.items():
                if now.get(attr, _MISSING) is not value:
                    setattr(owner, attr, value)
            if isinstance(owner, type):
                for attr in set(now) - set(before):
                    delattr(owner, attr)


_MISSING = object()

# Proton's in-kernel markers (``with pl.scope("load"):``) are builtins that need a compiler
# semantic, which the interpreter does not provide; they only mean something while Proton
# instruments a compiled kernel, so in the interpreter they do nothing.
_PROTON_MARKERS = ("enter_scope", "exit_scope", "allocate_event", "start_event", "end_event")


def _silence_proton_scopes() -> dict[str, Any]:
    module = sys.modules.get("triton.profiler.language")
    if module is None:
        return {}
    saved = {name: getattr(module, name) for name in _PROTON_MARKERS if hasattr(module, name)}
    for name in saved:
        setattr(module, name, _no_op)
    return saved


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def innermost(obj: Any) -> Any:
    """Unwrap autotuners/heuristics down to the JITFunction or InterpretedFunction."""
    seen = 0
    while not isinstance(obj, (JITFunction, InterpretedFunction)) and hasattr(obj, "fn") and seen < 8:
        obj = obj.fn
        seen += 1
    return obj


def is_triton_kernel(obj: Any) -> bool:
    return isinstance(obj, KernelInterface) and isinstance(innermost(obj), (JITFunction, InterpretedFunction))


def python_function(obj: Any):
    return innermost(obj).fn


def find_triton_kernels(module: ModuleType) -> dict[str, Any]:
    """``{name: kernel}`` for the ``@triton.jit`` functions defined in ``module`` itself."""
    found = {}
    for name, obj in vars(module).items():
        if is_triton_kernel(obj) and python_function(obj).__module__ == module.__name__:
            found[name] = obj
    return found


@dataclass
class Launch:
    """One recorded launch: enough to compile the same specialisation again."""

    kernel: str  # the module attribute name
    args: tuple
    kwargs: dict
    grid: Any
    compiled: Any = None  # the CompiledKernel that ran (GPU tier)


@dataclass
class LaunchRecorder:
    """Wraps the ``run`` of each kernel so every launch is recorded, then passed through."""

    kernels: dict[str, Any]
    launches: list[Launch] = field(default_factory=list)

    def count(self) -> int:
        return len(self.launches)

    @contextlib.contextmanager
    def recording(self, execute: bool = True, compile_only: bool = False) -> Iterator[LaunchRecorder]:
        """Record launches while active. ``execute=False`` records without running them: all the
        CPU tier needs to compile a specialisation is its arguments. ``compile_only``: each launch
        is Triton's own warm-up instead, which compiles (or finds in the cache) and runs nothing."""
        patched = []
        for name, obj in self.kernels.items():
            inner = innermost(obj)
            previous = vars(inner).get("run", _MISSING)  # a recorder already active (nested)
            original = inner.run

            def run(*args, grid, warmup, _name=name, _original=original, **kwargs):
                launch = Launch(_name, args, dict(kwargs), grid)
                if not warmup:
                    self.launches.append(launch)
                if not execute:
                    return None
                if compile_only:
                    return _original(*args, grid=grid, warmup=True, **kwargs)
                with inside_launch():
                    result = _original(*args, grid=grid, warmup=warmup, **kwargs)
                if isinstance(result, triton.compiler.CompiledKernel):
                    launch.compiled = result
                return result

            inner.run = run
            patched.append((inner, previous))
        try:
            yield self
        finally:
            for inner, previous in reversed(patched):
                if previous is _MISSING:
                    del inner.run
                else:
                    inner.run = previous

    def distinct(self) -> list[Launch]:
        """One launch per (kernel, specialisation): the same kernel at two block sizes is two."""
        seen: dict[tuple, Launch] = {}
        for launch in self.launches:
            key = (launch.kernel, _spec_key(launch))
            seen.setdefault(key, launch)
        return list(seen.values())


def _spec_key(launch: Launch) -> tuple:
    def key(v: Any) -> Any:
        if hasattr(v, "data_ptr") and hasattr(v, "dtype"):
            return ("tensor", str(v.dtype), v.data_ptr() % 16 == 0)
        if isinstance(v, int) and not isinstance(v, bool):
            return ("int", v == 1, v % 16 == 0, v.bit_length() > 31)
        return (type(v).__name__, repr(v))

    return tuple(key(a) for a in launch.args) + tuple((k, key(v)) for k, v in sorted(launch.kwargs.items()))


def as_jit_function(obj: Any) -> JITFunction:
    """A compilable JITFunction for ``obj`` (interpreted functions are rebuilt from their source)."""
    inner = innermost(obj)
    if isinstance(inner, JITFunction):
        return inner
    return JITFunction(inner.fn, **getattr(inner, "kwargs", {}))


def target_for(capability: int) -> Any:
    from triton.backends.compiler import GPUTarget

    return GPUTarget("cuda", capability, 32)


def compile_launch(jit: JITFunction, launch: Launch, capability: int) -> Any:
    """Compile ``jit`` ahead of time for ``sm_<capability>`` with the launch's specialisation.

    Mirrors what ``JITFunction.run`` does before it compiles, minus the device query.
    """
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    target = target_for(capability)
    backend = make_backend(target)
    kwargs = dict(launch.kwargs)
    kwargs["debug"] = kwargs.get("debug", jit.debug) or knobs.runtime.debug
    for knob in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(knobs.compilation, knob):
            kwargs[knob] = getattr(knobs.compilation, knob)
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    bound_args, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound_args, specialization, options)
    source = ASTSource(jit, signature, constexprs, attrs)
    return triton.compile(source, target=target, options=options.__dict__)


def artifacts_of(compiled: Any) -> dict[str, Any]:
    """IRs and binaries of a CompiledKernel: ttir, ttgir, llir, ptx (text) and cubin (bytes)."""
    wanted = ("ttir", "ttgir", "llir", "ptx", "cubin")
    return {ext: compiled.asm[ext] for ext in wanted if ext in compiled.asm}


def metadata_of(compiled: Any) -> dict[str, Any]:
    meta = compiled.metadata
    out = {}
    for key in ("name", "num_warps", "num_stages", "num_ctas", "shared", "arch", "maxnreg"):
        value = getattr(meta, key, None)
        if value is not None:
            out[key] = value if isinstance(value, (int, str, float)) else str(value)
    for key in ("n_regs", "n_spills", "n_max_threads"):
        value = getattr(compiled, key, None)  # set only once loaded on a device
        if isinstance(value, int) and value >= 0:
            out[key] = value
    return out


class TritonCapture(Capture):
    """The traced call's launches, recorded; on a GPU the launch compiled the kernel and ran it, on
    the CPU tier it is only recorded and compiled here afterwards, ahead of time, for the target."""

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.recorder = LaunchRecorder(ctx.kernels.get(TRITON.name, {}))
        self._recording: Any = None

    def __enter__(self) -> TritonCapture:
        self._recording = self.recorder.recording(execute=self.ctx.tier.is_gpu)
        self._recording.__enter__()
        return self

    def __exit__(self, *exc: Any) -> bool:
        return bool(self._recording.__exit__(*exc))

    @property
    def launches(self) -> int:  # type: ignore[override]
        return self.recorder.count()

    def compiled(self) -> list[CompiledFunction]:
        ctx = self.ctx
        out = []
        for launch in self.recorder.distinct():
            kernel = ctx.kernels[TRITON.name][launch.kernel]
            ck = launch.compiled
            if ck is None:
                jit = as_jit_function(ctx.compilable.__dict__[launch.kernel])
                ck = compile_launch(jit, launch, ctx.tier.capability)
            out.append(CompiledFunction(dsl=TRITON.name, name=ck.metadata.name,
                                        source_fn=python_function(kernel).__qualname__,
                                        artifacts=artifacts_of(ck), metadata=metadata_of(ck)))
        return out


class TritonDsl(Dsl):
    facts = dsls.TRITON
    compiles_ahead = True  # a warm-up launch compiles into Triton's on-disk cache, which every process reads
    needs_compilable_import = True  # the CPU tier's kernels are interpreted: the compile rung builds real ones

    def configure(self, arch: str) -> None:
        # Triton's documented default, made explicit: it is part of Triton's cache key, so the worker,
        # the compile-ahead helpers and the profiler's target build and find the same kernels.
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

    @contextlib.contextmanager
    def importing(self, interpreted: bool) -> Iterator[None]:
        """``TRITON_INTERPRET`` while the module body runs: ``@triton.jit`` decides then between an
        interpreted and a compiled kernel."""
        saved = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if interpreted else "0"
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = saved

    def find(self, module: ModuleType) -> dict[str, Any]:
        return dict(sorted(find_triton_kernels(module).items()))

    def capture(self, ctx: Any) -> TritonCapture:
        return TritonCapture(ctx)

    @contextlib.contextmanager
    def counting(self, kernels: dict[str, Any], received: Any, execute: bool) -> Iterator[list[int]]:
        recorder = LaunchRecorder(kernels)
        count = [0]
        try:
            with recorder.recording(execute=execute):
                yield count
        finally:
            count[0] = recorder.count()
            for launch in recorder.launches:
                received.add(launch.args)
                received.add(launch.kwargs)

    def compiling_only(self, kernels: dict[str, Any]) -> Any:
        return LaunchRecorder(kernels).recording(compile_only=True)

    def call_scope(self, is_gpu: bool) -> Any:
        return contextlib.nullcontext() if is_gpu else interpreter_environment()

    def is_compile_error(self, exc: BaseException) -> bool:
        return any(type(e).__module__.startswith("triton") and "Compilation" in type(e).__name__
                   for e in _causes(exc))

    def place(self, exc: BaseException, user_files: set[str], modules: Iterable[ModuleType]) -> Placed | None:
        errors = _compilation_errors(exc)
        if not errors:  # the backend's own compilers: ptxas's errors, not Triton's wrapper line
            said = compiler_errors.ptxas_message(str(exc)) if type(exc).__module__.startswith("triton") else None
            return Placed(said) if said else None
        inner = errors[0].error_message or ""
        if not inner and errors[0].__cause__ is not None:
            inner = f"{type(errors[0].__cause__).__name__}: {errors[0].__cause__}"
        jits = [as_jit_function(obj) for m in modules for obj in vars(m).values() if is_triton_kernel(obj)]
        return Placed(inner or str(errors[0]), _location(errors, jits))

    def dump_stem(self, compiled: CompiledFunction) -> str:
        return compiled.name  # the GPU symbol is the kernel's Python name

    def unmasked(self, kernels: dict[str, Any], snapshot: Path, kernel_path: str) -> dict[str, list[str]]:
        """Per access (``load``, ``store``), ``"add_kernel at oob_read.py:16"`` for each ``tl.load``
        or ``tl.store`` without a mask: what a CPU-tier failure points at, since the interpreter
        checks no bounds."""
        found: dict[str, list[str]] = {op: [] for op in FIGURES}
        for kernel in kernels.values():
            fn = python_function(kernel)
            try:
                lines, start = inspect.getsourcelines(fn)
                file = inspect.getsourcefile(fn) or ""
            except (OSError, TypeError):
                continue
            if Path(file).resolve() == snapshot.resolve():
                file = kernel_path  # the run's snapshot of the kernel file: name the file itself
            for op, numbers in unmasked_lines("".join(lines), start).items():
                found[op] += [f"{fn.__name__} at {Path(file).name}:{line}" for line in numbers]
        return found


TRITON = TritonDsl()


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and its ``__cause__`` chain (what the compile rung has always looked through)."""
    out = []
    current: BaseException | None = exc
    while current is not None and current not in out:
        out.append(current)
        current = current.__cause__
    return out


def _compilation_errors(exc: BaseException) -> list:
    """Triton ``CompilationError``s in the exception chain, innermost first."""
    found = [e for e in chain(exc)
             if type(e).__module__.startswith("triton") and hasattr(e, "node") and hasattr(e, "src")]
    return found[::-1]


def _location(errors: list, jit_functions: list) -> SourceLocation | None:
    for err in errors:
        if not hasattr(err.node, "lineno"):
            continue
        for jit in jit_functions:
            if getattr(jit, "src", None) == err.src:
                def_line, indent = _def_position(jit)
                # The node is relative to the kernel's dedented source, starting at its ``def`` line.
                return location(jit.fn.__code__.co_filename, def_line + err.node.lineno - 1, err.node.col_offset + indent + 1)
    return None


def _def_position(jit: Any) -> tuple[int, int]:
    """File line of a jit function's ``def`` and its indent (Triton 3.6 has no attribute for it)."""
    for offset, text in enumerate(jit.raw_src):
        stripped = text.lstrip()
        if stripped.startswith("def "):
            return jit.starting_line_number + offset, len(text) - len(stripped)
    return jit.starting_line_number, 0
