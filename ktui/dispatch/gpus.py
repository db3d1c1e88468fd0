"""Which GPUs of this host ktui runs on, found without importing torch in the parent.

A device is what one worker's ``CUDA_VISIBLE_DEVICES`` names: an index or a UUID. ``--gpus 0,1``
lists them; without it, ktui takes the entries of the parent's own ``CUDA_VISIBLE_DEVICES`` when
it is set, else every GPU ``nvidia-smi`` lists. A list of one device (or none: the CPU tier)
keeps a single warm worker that sees what the parent sees, as before several GPUs were known.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]
UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


class DeviceError(ValueError):
    """A ``--gpus`` list ktui cannot use; the message says why."""


@dataclass(frozen=True)
class Device:
    """One GPU: ``index`` is the ``CUDA_VISIBLE_DEVICES`` entry its worker gets; ``uuid`` and
    ``name`` (the model) are known where ``nvidia-smi`` answered, else empty."""

    index: str
    uuid: str = ""
    name: str = ""

    def label(self) -> str:
        return f"GPU {self.index}"


def listed_gpus(run=subprocess.run) -> list[Device]:
    """Every GPU ``nvidia-smi`` lists (none where it is missing or fails)."""
    if shutil.which(QUERY[0]) is None:
        return []
    try:
        out = run(QUERY, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    devices = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            devices.append(Device(parts[0], parts[1], ", ".join(parts[2:])))
    return devices


def parse_gpus(text: str) -> list[str]:
    """``--gpus 0,1`` (indices or GPU-/MIG- UUIDs) as a list of entries; DeviceError when bad."""
    entries = [e.strip() for e in text.split(",")]
    if not text.strip() or any(not e for e in entries):
        raise DeviceError(f"--gpus expects a comma-separated list of GPU indices or UUIDs, e.g. 0,1; got {text!r}")
    for entry in entries:
        if not (entry.isdigit() or UUID.match(entry)):
            raise DeviceError(f"--gpus: {entry!r} is neither a GPU index (0, 1, …) nor a GPU UUID (GPU-…)")
    if len(set(entries)) != len(entries):
        raise DeviceError(f"--gpus names a GPU twice: {text!r} (one worker per GPU)")
    return entries


def resolve(entries: list[str], known: list[Device]) -> list[Device]:
    """The devices ``entries`` name, with the UUID and model ``known`` (nvidia-smi) gives each;
    an entry that names no listed GPU is an error where nvidia-smi listed any."""
    by_entry = {d.index: d for d in known} | {d.uuid: d for d in known if d.uuid}
    out = []
    for entry in entries:
        found = by_entry.get(entry)
        if found is None and known:
            have = ", ".join(d.index for d in known)
            raise DeviceError(f"--gpus: no GPU {entry} on this host (nvidia-smi lists {have})")
        out.append(Device(entry, found.uuid, found.name) if found else Device(entry))
    return out


def visible_devices(gpus: str | None = None, env: dict[str, str] | None = None, run=subprocess.run) -> list[Device]:
    """The devices to run on: ``gpus`` (the ``--gpus`` text) when given, else the parent's
    ``CUDA_VISIBLE_DEVICES`` entries when set (empty or ``-1``: none), else every listed GPU."""
    env = os.environ if env is None else env
    if gpus is not None:
        return resolve(parse_gpus(gpus), listed_gpus(run))
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if not entries or entries[0].startswith("-"):
            return []
        known = {d.index: d for d in listed_gpus(run)}
        known |= {d.uuid: d for d in known.values() if d.uuid}
        return [Device(e, known[e].uuid, known[e].name) if e in known else Device(e) for e in entries]
    return listed_gpus(run)
