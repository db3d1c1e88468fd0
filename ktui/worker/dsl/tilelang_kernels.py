"""TileLang kernels of a user module: find them, capture every compile with its artifacts, count launches.

Written against tilelang 0.1.15. A ``@tilelang.jit`` function (``JITImpl``) compiles on its first
call for a specialisation (``JITImpl.compile``: the TIR is lowered to CUDA C, which nvcc turns into
a CUBIN through ``tilelang.contrib.nvcc.compile_cuda``) and launches through ``JITKernel.__call__``.
Lowering and nvcc need no GPU, so the CPU tier compiles for ``--arch`` (sm_90a by default) and skips
the launch (``LaunchSkipped``); TileLang cannot run on a CPU. TileLang's own on-disk caches are
turned off, so every compile is lowered by this process, which sees it; its nvcc step is ktui's
(``tilelang_nvcc``: once per CUDA source, kept for every workspace of the user). Compile-ahead
helpers build a run's other specialisations, all at once, into that cache (``compiling_only``).
tilelang is imported lazily: the worker runs without it, and a kernel file that needs it is told
what to install.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any, Iterable, Iterator

from ktui.protocol import dsls
from ktui.protocol.sourcelines import location
from ktui.worker.dsl import compiler_errors, tilelang_nvcc
from ktui.worker.dsl.base import Capture, Dsl, LaunchSkipped, Placed
from ktui.worker.outcome import CompiledFunction
from ktui.worker.provenance import inside_launch

_ENTRY = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\((?P<bounds>[^)]*)\) )?(?P<name>\w+)\(')


def configure_env(arch: str) -> None:
    """Target ``arch``, turn TileLang's caches off and name its CUDA toolkit; call before ``import tilelang``.

    ``TILELANG_DEFAULT_TARGET`` makes lowering target CUDA without asking a GPU; with the kernel
    cache on, a second compile of the same kernel would be read from disk and never seen. The
    toolkit is the one ``CUDA_HOME`` or ``CUDA_PATH`` names, else the ``tilelang`` extra's
    (``tilelang_nvcc.toolkit_home``), which TileLang would otherwise rank below any nvcc on PATH."""
    os.environ["TILELANG_DEFAULT_TARGET"] = json.dumps({"kind": "cuda", "arch": arch})
    home = None if os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") else tilelang_nvcc.toolkit_home()
    if home is not None:
        os.environ["CUDA_HOME"] = home
    os.environ["TILELANG_DISABLE_CACHE"] = "1"
    os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")
    if not os.environ.get("TILELANG_CACHE_DIR", "").startswith(tempfile.gettempdir()):
        os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="ktui-tilelang-")  # the worker's private temp


def is_tilelang_kernel(obj: Any) -> bool:
    """True for a ``@tilelang.jit`` function (only once tilelang is imported: else none can exist)."""
    jit = sys.modules.get("tilelang.jit")
    return jit is not None and isinstance(obj, getattr(jit, "JITImpl", ()))


def python_function(kernel: Any) -> Any:
    """The user's Python function behind a ``@tilelang.jit`` function."""
    return getattr(getattr(kernel, "func", None), "orig_func", None) or kernel


def find_tilelang_kernels(module: ModuleType) -> dict[str, Any]:
    """``{name: kernel}`` for the ``@tilelang.jit`` functions defined in ``module`` itself."""
    return {name: obj for name, obj in vars(module).items()
            if is_tilelang_kernel(obj) and getattr(python_function(obj), "__module__", None) == module.__name__}


class TileLangCapture(Capture):
    """Record every TileLang compile while active: TIR, CUDA C, and the PTX and CUBIN of its nvcc
    step (``tilelang_nvcc``). With ``execute=False`` a launch after the compile raises
    ``LaunchSkipped`` (the CPU tier)."""

    def __init__(self, execute: bool, arch: str):
        self.execute = execute
        self.arch = arch
        self.records: list[CompiledFunction] = []
        self.launches = 0
        self._builds: list[tilelang_nvcc.Build] = []
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> TileLangCapture:
        from tilelang.jit import JITImpl
        from tilelang.jit.kernel import JITKernel

        cap = self
        self._stack.__enter__()
        tilelang_nvcc.install()
        self._stack.enter_context(tilelang_nvcc.listening(self._builds.append))

        def compile(orig):
            def wrapper(impl, *args, **kwargs):
                started, before = time.perf_counter(), len(cap._builds)
                try:
                    kernel = orig(impl, *args, **kwargs)
                except Exception as exc:
                    _mark(exc)
                    raise
                build = cap._builds[-1] if len(cap._builds) > before else None
                cap.records.append(cap._record(impl, kernel, build, time.perf_counter() - started))
                return kernel
            return wrapper

        def launch(orig):
            def wrapper(kernel, *args, **kwargs):
                cap.launches += 1
                if not cap.execute:
                    raise LaunchSkipped(f"compiled {kernel.prim_func.attrs['global_symbol']}; execution skipped")
                try:
                    return orig(kernel, *args, **kwargs)
                except Exception as exc:
                    _mark(exc, "_ktui_launch_error")
                    raise
            return wrapper

        def trace(orig):
            # A JIT function's call binds its arguments, traces the body to TIR and compiles before
            # any launch: what leaves it, not from a launch, is the compiler refusing the kernel.
            def wrapper(impl, *args, **kwargs):
                try:
                    return orig(impl, *args, **kwargs)
                except LaunchSkipped:
                    raise
                except Exception as exc:
                    if not getattr(exc, "_ktui_launch_error", False):
                        _mark(exc)
                    raise
            return wrapper

        _patch(self._stack, JITImpl, "compile", compile)
        _patch(self._stack, JITImpl, "__call__", trace)
        _patch(self._stack, JITKernel, "__call__", launch)
        return self

    def __exit__(self, *exc: Any) -> bool:
        return bool(self._stack.__exit__(*exc))

    def compiled(self) -> list[CompiledFunction]:
        return list(self.records)

    def _record(self, impl: Any, kernel: Any, build: tilelang_nvcc.Build | None, seconds: float) -> CompiledFunction:
        source = kernel.get_kernel_source()
        entries = list(_ENTRY.finditer(source))
        fn = python_function(impl)
        code = getattr(fn, "__code__", None)
        artifacts: dict[str, Any] = {"tir": kernel.prim_func.script(), "cu": source}
        if build is not None:
            artifacts["cubin"] = build.cubin
            if build.ptx is not None:  # the PTX that became this CUBIN, kept by its nvcc run
                artifacts["ptx"] = build.ptx
        return CompiledFunction(
            dsl=TILELANG.name,
            name=entries[0]["name"] if entries else str(kernel.prim_func.attrs["global_symbol"]),
            source_fn=getattr(fn, "__qualname__", "tilelang_kernel"),
            artifacts=artifacts,
            metadata={
                "arch": self.arch,
                "kernels": [m["name"] for m in entries],
                "launch_bounds": entries[0]["bounds"] if entries and entries[0]["bounds"] else None,
                "compile_s": round(seconds, 4),
                "nvcc_s": build.nvcc_s if build is not None else None,
                "reused": build.reused if build is not None else False,
                "file": code.co_filename if code else None,
                "line": code.co_firstlineno if code else None,
            },
        )


def _patch(stack: contextlib.ExitStack, owner: Any, attr: str, make: Any) -> None:
    original = getattr(owner, attr)
    setattr(owner, attr, make(original))
    stack.callback(setattr, owner, attr, original)


def _mark(exc: BaseException, flag: str = "_ktui_tilelang_compile_error") -> None:
    with contextlib.suppress(Exception):  # an exception type without __dict__ stays unmarked
        setattr(exc, flag, True)


@contextlib.contextmanager
def count_launches(received: Any, execute: bool) -> Iterator[list[int]]:
    """Every launch goes through ``JITKernel.__call__``: counted, its arguments and what it returns
    kept for provenance (outputs declared with ``T.empty`` are allocated by the callee, so the
    returned tensors came from the kernel). With ``execute=False`` nothing runs and the declared
    outputs come back poisoned, as a kernel that wrote nothing would leave them."""
    from tilelang.jit.kernel import JITKernel

    counter = [0]
    original = JITKernel.__dict__["__call__"]

    def counted(kernel, *args, **kwargs):
        counter[0] += 1
        received.add(args)
        received.add(kwargs)
        if not execute:
            return _unwritten_outputs(kernel, args)
        with inside_launch():
            out = original(kernel, *args, **kwargs)
        received.add(out)
        return out

    JITKernel.__call__ = counted
    try:
        yield counter
    finally:
        JITKernel.__call__ = original


def _unwritten_outputs(kernel: Any, args: tuple) -> Any:
    """What a no-op launch returns: one poisoned tensor per output the callee would allocate
    (``out_idx``), on the inputs' device; None when the kernel writes only buffers it was handed."""
    import torch

    from ktui.worker.tier import fill_poison

    out_idx = list(getattr(kernel.adapter, "result_idx", None) or [])
    if not out_idx:
        return None
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cuda"))
    outputs = []
    for index in out_idx:
        param = kernel.params[index]
        shape = [int(s) for s in param.shape]  # a symbolic size raises: the no-op cannot stand in
        outputs.append(fill_poison(torch.empty(shape, dtype=param.torch_dtype(), device=device)))
    return outputs[0] if len(outputs) == 1 else outputs


AHEAD_THREADS = 4  # a helper's builds at once: each is mostly nvcc, one core


@contextlib.contextmanager
def compiling_ahead(threads: int = AHEAD_THREADS) -> Iterator[None]:
    """While active, a ``@tilelang.jit`` function's compile (tracing, lowering, ktui's nvcc step)
    runs on a thread of its own and the call returns at once with a kernel whose launches do
    nothing: a compile-ahead helper's shapes are built at the same time (lowering releases the GIL,
    as TileLang's own ``par_compile`` relies on; nvcc is a process), into ktui's build cache.
    Leaving waits for the builds. One that fails is the worker's to find and report."""
    from tilelang.jit import JITImpl

    tilelang_nvcc.install()
    original = JITImpl.__dict__["compile"]
    builds = ThreadPoolExecutor(threads, thread_name_prefix="ktui-tilelang-ahead")

    def compile(impl, *args, **kwargs):
        builds.submit(original, impl, *args, **kwargs)
        return _Unbuilt()

    JITImpl.compile = compile
    try:
        yield
    finally:
        JITImpl.compile = original
        builds.shutdown(wait=True)


class _Unbuilt:
    """What a compile ahead returns while its build runs elsewhere: launching it does nothing."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


def is_compile_error(exc: BaseException) -> bool:
    """Whether ``exc``, or what it was raised from, left a TileLang compile (tracing, lowering, nvcc)."""
    seen = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        if getattr(current, "_ktui_tilelang_compile_error", False):
            return True
        seen.append(current)
        current = current.__cause__ or current.__context__
    return False


class TileLangDsl(Dsl):
    facts = dsls.TILELANG
    compiles_ahead = True  # into ktui's build cache, which every process of the user reads (``tilelang_nvcc``)

    def configure(self, arch: str) -> None:
        configure_env(arch)

    def prepare(self) -> None:
        tilelang_nvcc.install()

    def find(self, module: ModuleType) -> dict[str, Any]:
        return find_tilelang_kernels(module)

    def capture(self, ctx: Any) -> TileLangCapture:
        return TileLangCapture(execute=ctx.tier.is_gpu, arch=ctx.tier.arch)

    def counting(self, kernels: dict[str, Any], received: Any, execute: bool) -> Any:
        return count_launches(received, execute)

    def compiling_only(self, kernels: dict[str, Any]) -> Any:
        return compiling_ahead()

    def is_compile_error(self, exc: BaseException) -> bool:
        return is_compile_error(exc)

    def place(self, exc: BaseException, user_files: set[str], modules: Iterable[ModuleType]) -> Placed | None:
        """The compiler's own words (``compiler_errors``): nvcc's error lines, or lowering's first
        statement, at the line its rendered ``-->`` names; without one, the deepest frame in the
        user's file (``errors.error_info``'s fallback: TileLang re-executes the kernel's body under
        its file's name and line numbers)."""
        if not is_compile_error(exc):
            return None
        text = str(exc) or type(exc).__name__
        found = compiler_errors.pointer(text, user_files)
        return Placed(compiler_errors.nvcc_message(text) or compiler_errors.first_words(text) or type(exc).__name__,
                      location(*found) if found else None)


TILELANG = TileLangDsl()
