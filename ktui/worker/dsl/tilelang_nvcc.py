"""TileLang's nvcc step as ktui runs it: once per CUDA source, its CUBIN and PTX kept for every
workspace of this user.

TileLang lowers a kernel to CUDA C and hands it to ``tilelang.contrib.nvcc.compile_cuda`` for a
CUBIN; nvcc is most of a compile (1.0 s of 1.2 s for the shipped softmax on a 2-core machine,
its front end ``cicc`` 0.8 s of that). ``install`` routes that call through here, process-wide:

* the CUBIN's own nvcc run keeps its PTX (``--keep``: the same command, the same CUBIN), where the
  dumps used to run nvcc a second time for it;
* the result is stored in ktui's build cache (``buildcache``, in ``builds_folder``)
  under the hash of what nvcc was given — the CUDA source, the target, the options, nvcc and the
  host compiler it runs, the CUDA headers' and TileLang's versions — so a save that leaves a
  specialisation's CUDA source as it was, another workspace, or the worker after a compile-ahead
  helper built it (``ktui.worker.ahead``) never reaches nvcc; a build in progress elsewhere is
  waited for, not repeated.

``KTUI_NO_BUILD_CACHE=1`` turns the cache off: every compile runs nvcc (still once). Observers
(``listening``) learn of every build: the compile rung's capture keeps its CUBIN and PTX.

Which nvcc: the CUDA toolkit ``CUDA_HOME`` (or ``CUDA_PATH``) names, else the one the ``tilelang``
extra installed (``nvidia-cuda-nvcc`` with its headers, CCCL's among them: ``toolkit_home``), else
TileLang's own search (nvcc on PATH, ``/usr/local/cuda``). The extra's comes before whatever nvcc
PATH holds: the version ktui pins and tests with, complete without a system toolkit.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ktui.protocol.statedir import compiler_caches
from ktui.worker.dsl.buildcache import BuildCache, key_of

NO_CACHE_ENV = "KTUI_NO_BUILD_CACHE"  # "1": TileLang's nvcc step neither reads nor writes ktui's cache
BUILDS_ENV = "KTUI_TILELANG_BUILDS"  # the folder of the cache, where a process is given one of its own


def builds_folder() -> Path:
    """Where TileLang's nvcc builds are kept: ``$KTUI_TILELANG_BUILDS``, else ``tilelang-builds``
    among ktui's compiler caches (TileLang's own cache, which ktui turns off, is not this one)."""
    return Path(os.environ.get(BUILDS_ENV) or compiler_caches() / "tilelang-builds")


@dataclass(frozen=True)
class Build:
    """One CUBIN as TileLang received it: with the PTX nvcc made on the way, whether it came from
    ktui's cache, and the seconds nvcc ran (0 when reused)."""

    cubin: bytes
    ptx: str | None
    reused: bool
    nvcc_s: float


def toolkit_home() -> str | None:
    """The root of the CUDA toolkit the ``tilelang`` extra installed (``nvidia/cu13`` of the
    environment: ``bin/nvcc``, ``include``), or None where ``nvidia-cuda-nvcc`` has no nvcc."""
    try:
        files = importlib.metadata.files("nvidia-cuda-nvcc") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    nvcc = next((f for f in files if f.name == "nvcc" and f.parent.name == "bin"), None)
    return str(Path(nvcc.locate()).resolve().parent.parent) if nvcc is not None else None


_observers: list[Callable[[Build], None]] = []
_lock = threading.Lock()


@contextlib.contextmanager
def listening(observer: Callable[[Build], None]) -> Iterator[None]:
    """Call ``observer`` with every build made while active (from any thread)."""
    with _lock:
        _observers.append(observer)
    try:
        yield
    finally:
        with _lock:
            _observers.remove(observer)


def install() -> None:
    """Route ``tilelang.contrib.nvcc.compile_cuda`` through ``compile_cuda`` below (once per
    process; TileLang's CUDA backend and its PTX helper look the function up at each call)."""
    import tilelang.contrib.nvcc as nvcc

    if getattr(nvcc.compile_cuda, "_ktui_original", None) is not None:
        return
    original = nvcc.compile_cuda

    def routed(code, target_format="ptx", arch=None, options=None, path_target=None, verbose=False):
        return compile_cuda(original, code, target_format, arch, options, path_target, verbose)

    routed._ktui_original = original  # type: ignore[attr-defined]
    nvcc.compile_cuda = routed


def compile_cuda(original: Callable[..., Any], code: str, target_format: str, arch: Any, options: Any,
                 path_target: Any, verbose: bool) -> bytearray:
    """A CUBIN from ktui's cache, or from one nvcc run that keeps its PTX; anything else (PTX alone,
    a fatbin, an explicit output path or an architecture left to the current target) is TileLang's
    own call."""
    if target_format != "cubin" or path_target is not None or arch is None:
        return original(code, target_format, arch, options=options, path_target=path_target, verbose=verbose)
    flags = [options] if isinstance(options, str) else list(options or [])
    if os.environ.get(NO_CACHE_ENV, "") not in ("", "0"):
        return _told(_nvcc(original, code, arch, flags, verbose))
    cache = BuildCache(builds_folder())
    key = key_of(code=code, arch=arch, options=flags, **_toolchain())
    found = cache.get(key)
    if found is None:
        with cache.building(key) as found:
            if found is None:
                build = _nvcc(original, code, arch, flags, verbose)
                cache.put(key, {"cubin": build.cubin, **({"ptx": build.ptx.encode()} if build.ptx is not None else {})})
                return _told(build)
    ptx = found.get("ptx")
    return _told(Build(found["cubin"], ptx.decode() if ptx is not None else None, reused=True, nvcc_s=0.0))


def _nvcc(original: Callable[..., Any], code: str, arch: Any, flags: list[str], verbose: bool) -> Build:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ktui-nvcc-") as kept:
        cubin = original(code, "cubin", arch, options=[*flags, "--keep", f"--keep-dir={kept}"], verbose=verbose)
        ptx = next((p.read_text(errors="replace") for p in sorted(Path(kept).glob("*.ptx"))), None)
    return Build(bytes(cubin), ptx, reused=False, nvcc_s=round(time.perf_counter() - started, 4))


def _told(build: Build) -> bytearray:
    with _lock:
        observers = list(_observers)
    for observer in observers:
        observer(build)
    return bytearray(build.cubin)


_toolchain_seen: dict[str, Any] = {}


def _toolchain() -> dict[str, Any]:
    """What else a CUBIN depends on: TileLang's version (its headers), the nvcc binary and the host
    compiler it preprocesses with, each by path, size and modification time, and the CUDA headers:
    the versions of the toolkit's Python packages, or a system toolkit's ``version.json`` (looked up
    once per process)."""
    if not _toolchain_seen:
        import tilelang
        import tilelang.contrib.nvcc as nvcc
        from tilelang.contrib.cc import get_cplus_compiler

        home = nvcc.find_cuda_path()
        packages = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                          if str(d.metadata["Name"]).lower().startswith(("nvidia-cuda-", "nvidia-nvvm")))
        _toolchain_seen.update(tilelang=tilelang.__version__, nvcc=_stat(nvcc.get_nvcc_compiler()),
                               host=_stat(get_cplus_compiler()), headers=[packages, _stat(f"{home}/version.json")])
    return _toolchain_seen


def _stat(path: str | None) -> list:
    found = shutil.which(path) if path else None  # a name (CXX=g++) is looked up as the shell would
    if not found:
        return [path]
    real = os.path.realpath(found)
    try:
        info = os.stat(real)
    except OSError:
        return [real]
    return [real, info.st_size, info.st_mtime_ns]
