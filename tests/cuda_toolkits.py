"""CUDA toolkits as users have them, made from the one on this machine: one without its CCCL headers
(``nv/``, ``cuda/``), as pip's ``nvidia-cuda-nvcc`` is without ``nvidia-cuda-cccl``. TileLang's
generated source then fails in nvcc with ``fatal error: nv/target: No such file or directory``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

CCCL = ("nv", "cuda", "cccl")  # the headers such a toolkit lacks


def installed_toolkit() -> Path | None:
    """The toolkit of the ``nvcc`` on PATH (through a wrapper script like /usr/local/bin/nvcc), if any."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    for candidate in (Path(nvcc).resolve().parent.parent, *sorted(Path("/usr/local").glob("cuda-*"))):
        if (candidate / "bin" / "nvcc.profile").is_file() and (candidate / "include" / "cuda_runtime.h").is_file():
            return candidate
    return None


def toolkit_without_cccl(dest: Path) -> Path:
    """A toolkit at ``dest`` that is the installed one without its CCCL headers: ``nvcc`` and its
    profile copied (nvcc finds its headers beside itself), the rest linked. For ``CUDA_HOME``."""
    real = installed_toolkit()
    if real is None:
        raise FileNotFoundError("no CUDA toolkit with nvcc here")
    (dest / "bin").mkdir(parents=True)
    (dest / "include").mkdir()
    (dest / "targets" / "x86_64-linux").mkdir(parents=True)
    for item in (real / "bin").iterdir():
        if item.name in ("nvcc", "nvcc.profile"):
            shutil.copy2(item, dest / "bin" / item.name)
        else:
            os.symlink(item, dest / "bin" / item.name)
    for item in (real / "include").iterdir():
        if item.name not in CCCL:
            os.symlink(item, dest / "include" / item.name)
    for name in ("lib", "lib64", "nvvm"):
        if (real / name).exists():
            os.symlink(real / name, dest / name)
    os.symlink("../../include", dest / "targets" / "x86_64-linux" / "include")
    os.symlink("../../lib", dest / "targets" / "x86_64-linux" / "lib")
    return dest
