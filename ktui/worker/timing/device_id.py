"""How every process of a host names one CUDA device, whatever its ``CUDA_VISIBLE_DEVICES``: NVML
finds the device's clocks by it (``clocks``) and ktui's processes take turns on it (``gpu_lock``);
and what kind of device it is, its MIG slice included, which a calibration is kept under."""

from __future__ import annotations

from typing import Any


def uuid_of(props: Any) -> str | None:
    """``GPU-…``, NVML's and nvidia-smi's spelling of the UUID torch gives, or None without one."""
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        return None
    text = str(uuid)
    return text if text.startswith("GPU-") else f"GPU-{text}"


def pci_bus_id_of(props: Any) -> str | None:
    """``00000000:BB:DD.0``, the PCI address NVML takes, or None where torch does not give it."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"


def mig_of(name: str, props: Any, visible_devices: str = "") -> tuple[str, str]:
    """(the device's name without its MIG part, its MIG profile or "" for a whole GPU). CUDA names
    a MIG slice ``NVIDIA A100-SXM4-40GB MIG 1g.5gb``; where the name does not say, a slice is told by
    a ``MIG-`` UUID (its own, or the one ``CUDA_VISIBLE_DEVICES`` chose) and described by what it
    has: ``16 SMs, 17.8 GiB``."""
    base, sep, profile = name.partition(" MIG ")
    if sep and profile.strip():
        return base.strip(), profile.strip()
    uuid = str(getattr(props, "uuid", "") or "")
    if uuid.startswith("MIG-") or any(part.strip().startswith("MIG-") for part in visible_devices.split(",")):
        sms = getattr(props, "multi_processor_count", 0)
        memory = getattr(props, "total_memory", 0) / 2**30
        return name.strip(), f"{sms} SMs, {memory:.1f} GiB"
    return name.strip(), ""
