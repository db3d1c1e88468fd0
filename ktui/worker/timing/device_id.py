"""How every process of a host names one CUDA device, whatever its ``CUDA_VISIBLE_DEVICES``: NVML
finds the device's clocks by it (``clocks``) and ktui's processes take turns on it (``gpu_lock``)."""

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
