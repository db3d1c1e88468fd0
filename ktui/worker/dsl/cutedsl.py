"""Ahead-of-time CuTeDSL compilation and artifact capture (no GPU needed).

ktui's CPU tier runs a user's ``custom_kernel`` under ``CuteCapture(execute=False)``:
every CuTeDSL compile that happens inside is really lowered to PTX and CUBIN for
the configured arch (``sm_90a`` by default), recorded, and the launch that would
follow is replaced by ``ExecutionSkipped``.  On the GPU tier ``execute=True``
records the same artifacts and lets the launch run.

Written against nvidia-cutlass-dsl 4.8.1, whose compiled object only exposes
PTX/CUBIN (``__ptx__``/``__cubin__``) when dumping was requested: so a few
internals of that version are patched while a capture is active (numbered
below).  cutlass is imported lazily so this module can be imported before
``configure_env`` has run.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from types import ModuleType
from typing import Any, Iterable, Iterator

from ktui.protocol import dsls
from ktui.protocol.sourcelines import location
from ktui.worker.dsl import compiler_errors
from ktui.worker.dsl.base import Capture, Dsl, LaunchSkipped, Placed
from ktui.worker.outcome import CompiledFunction
from ktui.worker.provenance import inside_launch

__all__ = [
    "CUTEDSL",
    "CuteCapture",
    "ExecutionSkipped",
    "configure_env",
    "find_cute_functions",
    "is_compile_error",
    "is_cute_function",
    "locate_compile_error",
]

DEFAULT_ARCH = "sm_90a"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DECOR = re.compile(r"[\U0001F000-\U0001FFFF]+")  # e.g. the ICE banner's emoji
_MLIR_LOC = re.compile(r'"(?P<file>[^"]+?\.py)":(?P<line>\d+):(?P<col>\d+)')


class ExecutionSkipped(LaunchSkipped):
    """A compiled CuTeDSL function was called while ``execute=False``.

    Compilation succeeded (``record`` holds its artifacts); the launch was
    skipped because this tier has no GPU.
    """

    def __init__(self, record: dict | None):
        self.record = record
        name = record["source_fn"] if record else "?"
        super().__init__(f"compiled {name}; execution skipped (execute=False)")


def configure_env(arch: str = DEFAULT_ARCH) -> None:
    """Target ``arch`` without a GPU.  Call before ``import cutlass``.

    CuTeDSL reads ``CUTE_DSL_ARCH`` once, when cutlass is imported (values are
    lru-cached and the DSL singleton is built at import); with no GPU and no
    variable it silently falls back to ``sm_100``.  If cutlass is already
    imported, the live setting is updated too (best effort).
    """
    os.environ["CUTE_DSL_ARCH"] = arch
    if "cutlass" in sys.modules:
        _dsl().envar.arch = arch


def _dsl():
    from cutlass.cutlass_dsl.cutlass import CuTeDSL

    return CuTeDSL._get_dsl()


def is_cute_function(obj) -> bool:
    """True for a ``@cute.jit`` or ``@cute.kernel`` decorated callable."""
    obj = getattr(obj, "__func__", obj)  # staticmethod / bound method
    return getattr(obj, "_decorator_kind", None) in ("jit", "kernel") and hasattr(obj, "_dsl_cls")


def _source_of(fn) -> tuple[str | None, int | None]:
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    code = getattr(fn, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else (None, None)


def find_cute_functions(module) -> list[tuple[str, object]]:
    """``[(qualname, obj)]`` of the CuTeDSL functions *defined* in ``module``.

    Looks at module globals and at methods of classes defined there; objects
    imported from elsewhere are left out (by ``__module__``).
    """
    name = module.__name__
    found: dict[str, object] = {}

    def visit(qual, obj):
        if is_cute_function(obj) and getattr(obj, "__module__", None) == name:
            found.setdefault(qual, obj)

    for attr, obj in vars(module).items():
        if inspect.isclass(obj) and obj.__module__ == name:
            for member, value in vars(obj).items():
                visit(f"{obj.__qualname__}.{member}", value)
        else:
            visit(getattr(obj, "__qualname__", attr), obj)
    return sorted(found.items(), key=lambda kv: _source_of(kv[1])[1] or 0)


class CuteCapture:
    """Record every CuTeDSL compile while active; optionally skip launches.

    ``records`` gets one dict per compile::

        {"dsl": "cutedsl", "name": <first .entry in the PTX>, "source_fn": <qualname
         of the @cute.jit function>, "file", "line", "artifacts": {"mlir": str,
         "ptx": str, "cubin": bytes}, "metadata": {"arch", "kernels", ...}}

    With ``execute=False`` calling a compiled function, or a ``@cute.jit``
    function directly, raises ``ExecutionSkipped`` after compiling.  Patches
    are process-wide (other threads' compiles are captured too) and only one
    capture may be active at a time.
    """

    _active_lock = threading.Lock()

    def __init__(self, execute: bool = False, arch: str | None = None, lineinfo: bool = True):
        self.execute = execute
        self.arch = arch or os.environ.get("CUTE_DSL_ARCH") or DEFAULT_ARCH
        self.lineinfo = lineinfo  # PTX .loc lines -> SASS can be mapped to Python lines
        self.records: list[dict] = []
        self._mlir: dict[str, str] = {}
        self._undo: list = []

    # -- context manager -------------------------------------------------
    def __enter__(self) -> CuteCapture:
        if not CuteCapture._active_lock.acquire(blocking=False):
            raise RuntimeError("another CuteCapture is already active")
        try:
            self._install()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> bool:
        while self._undo:
            self._undo.pop()()
        CuteCapture._active_lock.release()
        return False

    def _patch(self, owner, attr, make):
        original = owner.__dict__[attr]
        setattr(owner, attr, make(original))
        self._undo.append(lambda: setattr(owner, attr, original))

    def _install(self) -> None:
        from cutlass.base_dsl import compiler as C
        from cutlass.base_dsl.compile_backend import CompilerBackend
        from cutlass.base_dsl.dsl import BaseDSL
        from cutlass.base_dsl.jit_executor import JitCompiledFunction

        cap = self
        dump_dir = tempfile.mkdtemp(prefix="ktui-cute-")
        self._undo.append(lambda: shutil.rmtree(dump_dir, ignore_errors=True))

        # 1. CompileOptions.apply_envar_settings runs once per compile (cute.compile
        #    and direct @cute.jit calls) before dump paths are derived: force
        #    PTX/CUBIN dumps into our temp dir and the target arch.  Without a
        #    DumpDir, KEEP artifacts land in the current working directory.
        #    cute.compile shares one CompileOptions across calls, so every value
        #    changed here is put back on exit.
        touched: dict[int, tuple] = {}

        def force(option, value):
            touched.setdefault(id(option), (option, option.value))
            option.value = value

        def restore():
            for option, value in touched.values():
                option.value = value

        self._undo.append(restore)

        def apply_envar_settings(orig):
            def wrapper(opts, envar, function_name):
                o = opts.options
                force(o[C.KeepPTX], True)
                force(o[C.KeepCUBIN], True)
                force(o[C.DumpDir], dump_dir)
                if not o[C.GPUArch].value:
                    force(o[C.GPUArch], cap.arch)
                if cap.lineinfo:
                    force(o[C.GenerateLineInfo], True)
                return orig(opts, envar, function_name)

            return wrapper

        self._patch(C.CompileOptions, "apply_envar_settings", apply_envar_settings)

        # 2. CompilerBackend.compile is the one place every real compile passes
        #    through; the returned object has read the dumped files into .artifacts.
        def backend_compile(orig):
            def wrapper(backend, ctx):
                t0 = time.perf_counter()
                fn = orig(backend, ctx)
                rec = cap._record(fn, ctx.funcBody, time.perf_counter() - t0)
                fn._ktui_record = rec
                return fn

            return wrapper

        self._patch(CompilerBackend, "compile", backend_compile)

        # 3. Launch points of a compiled function.  run_compiled_program is what a
        #    direct @cute.jit call runs right after compiling; __call__ validates
        #    the arguments first (so arity/type errors still surface on CPU).
        def gate(orig, validate):
            def wrapper(fn, *args, **kwargs):
                rec = getattr(fn, "_ktui_record", None)
                if rec is not None and all(r is not rec for r in cap.records):
                    cap.records.append(rec)  # compiled earlier (user cache), used now
                try:
                    if cap.execute:
                        return orig(fn, *args, **kwargs)
                    if validate:
                        fn.execution_args.generate_execution_args(args, kwargs)
                except Exception as exc:
                    _mark(exc, "_ktui_launch_error")
                    raise
                raise ExecutionSkipped(rec)

            return wrapper

        self._patch(JitCompiledFunction, "__call__", lambda o: gate(o, True))
        self._patch(JitCompiledFunction, "run_compiled_program", lambda o: gate(o, False))
        self._patch(JitCompiledFunction, "to", lambda o: gate(o, False))

        # 4. BaseDSL._func is the entry of every trace + compile (cute.compile and
        #    direct @cute.jit calls): an exception leaving it that did not come
        #    from a launch is a compile error, marked for is_compile_error().
        def dsl_func(orig):
            def wrapper(*args, **kwargs):
                try:
                    return orig(*args, **kwargs)
                except ExecutionSkipped:
                    raise
                except Exception as exc:
                    if not getattr(exc, "_ktui_launch_error", False):
                        _mark(exc, "_ktui_compile_error")
                    raise

            return wrapper

        self._patch(BaseDSL, "_func", dsl_func)

        # 5. Trace-finalize hook: the traced module (CuTe dialect, before any
        #    lowering pass) is the readable MLIR.  The in-memory JIT cache would
        #    hand back an earlier compile without artifacts, so bypass it.
        dsl = _dsl()

        def hook(_owner, module, function_name):
            cap._mlir[function_name] = str(module)

        dsl.register_trace_finalize_hook(hook)
        self._undo.append(lambda: dsl._trace_finalize_hooks.remove(hook))
        old_no_cache = dsl.envar.no_cache
        dsl.envar.no_cache = True
        self._undo.append(lambda: setattr(dsl.envar, "no_cache", old_no_cache))

    @property
    def compiled(self) -> list:
        """``records`` as ``ktui.worker.context.CompiledFunction`` (file/line go to metadata)."""

        return [
            CompiledFunction(
                dsl=r["dsl"],
                name=r["name"],
                source_fn=r["source_fn"],
                artifacts={k: v for k, v in r["artifacts"].items() if v is not None},
                metadata={**r["metadata"], "file": r["file"], "line": r["line"]},
            )
            for r in self.records
        ]

    # -- records ---------------------------------------------------------
    def _record(self, fn, func_body, seconds: float) -> dict:
        art = fn.artifacts
        # .PTX/.CUBIN hold the dump *path* until the file has been read back
        ptx = art.PTX if art and isinstance(art.PTX, str) and ".target" in art.PTX else None
        cubin = art.CUBIN if art and isinstance(art.CUBIN, bytes) else _cubin_from_ir(fn)
        entries = re.findall(r"\.entry\s+([\w$]+)", ptx or "") or list(fn.kernel_info)
        target = re.search(r"^\.target\s+(\S+)", ptx or "", re.M)
        file, line = _source_of(func_body) if func_body else (None, None)
        record = {
            "dsl": dsls.CUTEDSL.name,
            "name": entries[0] if entries else fn.function_name,
            "source_fn": getattr(func_body, "__qualname__", fn.function_name),
            "file": file,
            "line": line,
            "artifacts": {"mlir": self._mlir.pop(fn.function_name, None), "ptx": ptx, "cubin": cubin},
            "metadata": {
                "arch": target.group(1) if target else self.arch,
                "kernels": entries,
                "host_function": fn.function_name,
                "compile_s": round(seconds, 4),
                "reqntid": re.findall(r"\.reqntid\s+([\d, ]+)", ptx or ""),
                "lineinfo": self.lineinfo,
                "has_host_engine": fn.engine is not None,
            },
        }
        self.records.append(record)
        return record


def _cubin_from_ir(fn) -> bytes | None:
    """Fallback: the lowered module embeds the CUBIN in its gpu.binary op."""
    try:
        from cutlass.base_dsl.jit_executor import walk_module_and_get_cubin_data

        out: list[bytes] = []
        for sym in fn.kernel_info:
            walk_module_and_get_cubin_data(fn.ir_module, sym, lambda s, f, data: out.append(data))
        return out[0] if out else None
    except Exception:
        return None


def _mark(exc: BaseException, flag: str) -> None:
    try:
        setattr(exc, flag, True)
    except Exception:  # an exception type without __dict__: leave it unmarked
        pass


def is_compile_error(exc: BaseException) -> bool:
    """True if ``exc`` (or what it was raised from) escaped a CuTeDSL trace or
    compile inside a ``CuteCapture``; False for launch errors and anything else.

    Needed because CuTeDSL's compile errors have no common type: NameError and
    type mistakes arrive as ``DSLUserCodeError``, bad IR as ``DSLRuntimeError``
    or ``MLIRError``, misuse of an API as plain ``ValueError``/``TypeError``.
    """
    return any(getattr(e, "_ktui_compile_error", False) for e in _chain(exc))


def _chain(exc):
    """exc and everything it was raised from (``__cause__``/``__context__``/``.cause``)."""
    seen = []
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if isinstance(e, BaseException) and all(e is not s for s in seen):
            seen.append(e)
            todo += [e.__cause__, e.__context__, getattr(e, "cause", None)]
    return seen


def _short_message(e: BaseException) -> str:
    diags = getattr(e, "_error_diagnostics", None)  # mlir.ir.MLIRError
    if diags:
        text = "; ".join(str(getattr(d, "message", d)) for d in diags)
    elif getattr(e, "message", None):  # DSLBaseError keeps the un-rendered text
        text = str(e.message)
        cause = getattr(e, "cause", None)
        if cause is not None and str(cause) not in text:
            text += f": {_short_message(cause)}"
    else:
        text = f"{type(e).__name__}: {e!s}"
    text = _DECOR.sub("", _ANSI.sub("", text)).strip()
    text = re.sub(r"\s+", " ", text).replace(" :", ":")
    return text if len(text) <= 400 else text[:397] + "..."


def locate_compile_error(exc: BaseException, module_file: str) -> dict | None:
    """Map a CuTeDSL compile exception to ``{file, line, col?, message}`` in ``module_file``.

    ``line`` and ``col`` are 1-based; ``message`` is one line, without colours.

    Tried in order: the DSL diagnostic's own ``filename``/``line``; the line its
    rendered error points at (``--> file:line:col``: IR verification's op at fault); the
    deepest traceback frame in the user's file (the DSL re-executes the rewritten
    function under its original file name and line numbers); an MLIR
    ``"file.py":line:col`` location in the message.  ``None`` if nothing in
    the exception points into ``module_file``.
    """
    target = os.path.realpath(module_file)

    def same(path) -> bool:
        return bool(path) and os.path.realpath(path) == target

    chain = _chain(exc)
    message = _short_message(exc)
    for e in chain:
        if same(getattr(e, "filename", None)) and getattr(e, "line", None):
            loc = {"file": target, "line": int(e.line), "message": _short_message(e)}
            if getattr(e, "col", None) is not None:
                loc["col"] = int(e.col) + 1  # DSL stores the 0-based ast col_offset
            return loc
    for e in chain:  # IR verification renders the op at fault (``--> file:95:8``); the frames end at cute.compile
        found = compiler_errors.pointer(str(e), {target})
        if found:
            return {"file": target, "line": found[1], **({"col": found[2]} if found[2] else {}), "message": message}
    for e in chain:
        for frame in reversed(traceback.extract_tb(e.__traceback__)):
            if same(frame.filename):
                loc = {"file": target, "line": frame.lineno, "message": message}
                if getattr(frame, "colno", None) is not None:
                    loc["col"] = frame.colno + 1
                return loc
    for e in chain:
        for m in _MLIR_LOC.finditer(_ANSI.sub("", str(e))):
            if same(m["file"]):
                return {"file": target, "line": int(m["line"]), "col": int(m["col"]) + 1, "message": message}
    return None


class _RungCapture(Capture):
    """``CuteCapture`` as the compile rung uses it: compiles kept, launches run only on a GPU."""

    def __init__(self, ctx: Any):
        self.capture = CuteCapture(execute=ctx.tier.is_gpu)

    def __enter__(self) -> _RungCapture:
        self.capture.__enter__()
        return self

    def __exit__(self, *exc: Any) -> bool:
        return self.capture.__exit__(*exc)

    def compiled(self) -> list[CompiledFunction]:
        return self.capture.compiled


class CuteDsl(Dsl):
    facts = dsls.CUTEDSL
    one_gpu_function_per_launch = False  # a launch counted is a host function's run, which may launch several

    def configure(self, arch: str) -> None:
        configure_env(arch)

    def find(self, module: ModuleType) -> dict[str, Any]:
        return dict(find_cute_functions(module))

    def capture(self, ctx: Any) -> Capture:
        return _RungCapture(ctx)

    def counting(self, kernels: dict[str, Any], received: Any, execute: bool) -> Any:
        return _count_launches(received, execute)

    def is_compile_error(self, exc: BaseException) -> bool:
        return is_compile_error(exc)

    def place(self, exc: BaseException, user_files: set[str], modules: Iterable[ModuleType]) -> Placed | None:
        """Its errors carry MLIR locations, or frames in the user's file: placed only when one does."""
        if not is_compile_error(exc):
            return None
        for file in sorted(user_files):
            found = locate_compile_error(exc, file)
            if found:
                return Placed(_ANSI.sub("", found["message"]), location(found["file"], found["line"], found.get("col")))
        return None


CUTEDSL = CuteDsl()


@contextlib.contextmanager
def _count_launches(received: Any, execute: bool = True) -> Iterator[list[int]]:
    """Every CuTeDSL host-function execution goes through ``JitExecutor.run_compiled_program``;
    the torch tensors it is handed are converted first (``from_dlpack`` builds a runtime
    ``_Tensor``) or passed to ``JitExecutor.__call__`` as they are: both are recorded."""
    from cutlass.base_dsl.jit_executor import JitExecutor
    from cutlass.cute.runtime import _Tensor

    counter = [0]
    original_run = JitExecutor.__dict__["run_compiled_program"]
    original_call = JitExecutor.__dict__["__call__"]
    original_convert = _Tensor.__dict__["__init__"]

    def converted(self, tensor, *args, **kwargs):
        received.add(tensor)
        return original_convert(self, tensor, *args, **kwargs)

    def counted(self, *args, **kwargs):
        counter[0] += 1
        if not execute:
            return None
        with inside_launch():
            return original_run(self, *args, **kwargs)

    def called(self, *args, **kwargs):
        received.add(args)
        received.add(kwargs)
        return original_call(self, *args, **kwargs)

    JitExecutor.run_compiled_program = counted
    JitExecutor.__call__ = called
    _Tensor.__init__ = converted
    try:
        yield counter
    finally:
        JitExecutor.run_compiled_program = original_run
        JitExecutor.__call__ = original_call
        _Tensor.__init__ = original_convert
