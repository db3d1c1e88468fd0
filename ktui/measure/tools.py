"""Finding NVIDIA's command-line tools: one search order for all of them.

``$KTUI_<NAME>`` (or the variable the caller names), then PATH, then the CUDA homes, then
NVIDIA's install folders (newest version first), then — for the binary utilities Triton ships
(``cuobjdump``, ``nvdisasm``, ``ptxas``) — Triton's wheel, so SASS is available with no toolkit.
No torch or triton import: the dashboard uses this too.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
from pathlib import Path


class ToolFailed(Exception):
    """The tool, or the kernel under it, failed or cannot be used as configured; the message says
    which and what to do (``ktui profile``/``sanitize`` exit 1 on it)."""


def find_tool(name: str, env_var: str | None = None, patterns: tuple[str, ...] = ()) -> str | None:
    """The tool's path, or None. See the module docstring for the search order."""
    env_var = env_var or f"KTUI_{name.upper().replace('-', '_')}"
    override = os.environ.get(env_var)
    if override:
        if Path(override).is_file() and os.access(override, os.X_OK):
            return override
        raise ToolFailed(f"{env_var}={override} is not an executable file")
    found = shutil.which(name)
    if found:
        return found
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [str(Path(h) / "bin" / name) for h in homes if h]
    for pattern in patterns:
        candidates += sorted(glob.glob(pattern), key=_version_key, reverse=True)
    spec = importlib.util.find_spec("triton")
    if spec and spec.submodule_search_locations:
        candidates.append(str(Path(spec.submodule_search_locations[0]) / "backends" / "nvidia" / "bin" / name))
    for candidate in candidates:
        if Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _version_key(path: str) -> list:
    parts = []
    for token in Path(path).parts:
        parts.extend(int(x) if x.isdigit() else x for x in token.replace("-", ".").split("."))
    return [(0, p) if isinstance(p, int) else (1, p) for p in parts]


