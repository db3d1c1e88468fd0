"""Whether this machine surely has no NVIDIA GPU, answered from the file system in a millisecond.

``ktui profile`` and ``ktui sanitize`` need a GPU; loading torch and the kernel to learn there is
none takes seconds. The driver makes ``/dev/nvidia<N>`` (``/dev/dxg`` under WSL) and
``/proc/driver/nvidia/gpus/*``; with none of them, or with ``CUDA_VISIBLE_DEVICES`` hiding every
device, no CUDA process here can see a GPU. Anything else is left to the tools' own pre-flight.
``KTUI_SKIP_GPU_CHECK=1`` leaves every case to it (a driver whose devices live elsewhere).
"""

from __future__ import annotations

import glob
import os

HIDDEN = ("", "-1")  # CUDA_VISIBLE_DEVICES values that hide every device
SKIP_ENV = "KTUI_SKIP_GPU_CHECK"


def no_gpu_reason() -> str | None:
    """Why no CUDA GPU can be visible here, or None when one may be (or the check is skipped)."""
    if os.environ.get(SKIP_ENV) == "1":
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in HIDDEN:
        return f"CUDA_VISIBLE_DEVICES={visible!r} hides every device"
    if glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/dxg") or glob.glob("/proc/driver/nvidia/gpus/*"):
        return None
    return "no NVIDIA driver device: /dev/nvidia0 and /proc/driver/nvidia/gpus/ are absent"
