"""What a workspace's daemon was started by, so that a caller never reuses one of another making.

A daemon keeps the code it was started with, its Python, the GPUs it was shown and the switches
its workers read. A caller whose own differ (ktui upgraded, another virtual environment, another
``CUDA_VISIBLE_DEVICES``, a file of the installation edited) must not be served by it:
``differences`` says, in words, what differs.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from pathlib import Path

import ktui

# The environment that decides which GPUs a process sees, and the switches ktui's workers read.
GPU_VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
SWITCHES = ("KTUI_NO_CONFINE", "KTUI_COMPILE_AHEAD", "KTUI_USER_DIR")
PACKAGE = Path(ktui.__file__).resolve().parent


def identity() -> dict[str, str]:
    """This process's making, as a daemon records it and a caller compares it."""
    return {
        "version": ktui.__version__,
        "python": f"{sys.executable} ({platform.python_version()})",
        "installation": f"{PACKAGE} {_stamp(PACKAGE)}",
        "gpus": _env(GPU_VISIBILITY),
        "switches": _env(SWITCHES),
    }


WORDS = {
    "version": "another version of ktui",
    "python": "another Python",
    "installation": "another or a changed installation of ktui",
    "gpus": "other GPU-visibility variables",
    "switches": "other KTUI_ switches",
}


def differences(theirs: dict[str, str], ours: dict[str, str]) -> str:
    """What differs between a daemon's making and a caller's, in words ("" when nothing does):
    ``another version of ktui (0.1.0, this is 0.2.0)``."""
    said = []
    for key, words in WORDS.items():
        if theirs.get(key) != ours.get(key):
            shown = f" ({theirs.get(key) or 'none'}; this is {ours.get(key) or 'none'})" if key in ("version", "gpus") else ""
            said.append(words + shown)
    return ", ".join(said)


def _env(names: tuple[str, ...]) -> str:
    return " ".join(f"{name}={os.environ[name]}" for name in names if name in os.environ)


def _stamp(package: Path) -> str:
    """A digest of the installation's Python files (their names, sizes and modification times):
    an edit, an upgrade in place or a checkout of another commit changes it."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        try:
            info = path.stat()
        except OSError:
            continue
        digest.update(f"{path.relative_to(package)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]
