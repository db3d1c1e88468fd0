"""The clocks a measurement ran at, and whether the GPU was throttling.

A kernel timed while the GPU sat at a power cap or a thermal limit is slower than the same kernel
a minute later; a version comparison across those two runs would be noise reported as a change.
So the benchmark samples the SM and memory clocks and the driver's throttle reasons while it
measures, and says what it saw.

Sources, in order: NVML through ``pynvml`` (the ``nvidia-ml-py`` package), else ``nvidia-smi``
(a subprocess per reading, so only a few readings), else none — and the figures say which.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ktui.worker.timing.device_id import pci_bus_id_of, uuid_of

# NVML clock-event ("throttle") reason bits, from nvml.h (nvmlClocksEventReason*).
REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# The reasons that mean the GPU ran below the clocks it could otherwise sustain. Idle, an
# application-clock setting and sync boost are choices or states, not throttling.
THROTTLING = {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit] + (
        [f"unknown_0x{mask & ~sum(REASONS):x}"] if mask & ~sum(REASONS) else []
    )


def parse_smi_line(line: str) -> tuple[int, int, int]:
    """``"1980, 3201, 0x0000000000000004"`` (clocks.sm, clocks.mem, reasons) → (1980, 3201, 4)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        raise ValueError(f"unexpected nvidia-smi line: {line!r}")
    return int(parts[0]), int(parts[1]), int(parts[2], 16)


@dataclass
class ClockReading:
    sm_mhz: int
    mem_mhz: int
    reasons: int


@dataclass
class ClockLog:
    """What was seen during one measurement."""

    source: str  # "nvml" | "nvidia-smi" | "unavailable: <why>"
    readings: list[ClockReading] = field(default_factory=list)
    sm_max_mhz: int | None = None

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"clock_source": self.source}
        if not self.readings:
            return out
        sm = sorted(r.sm_mhz for r in self.readings)
        mem = sorted(r.mem_mhz for r in self.readings)
        seen = sorted({name for r in self.readings for name in reason_names(r.reasons)})
        throttles = [name for name in seen if name in THROTTLING]
        out.update(sm_mhz=[sm[0], sm[-1]], mem_mhz=[mem[0], mem[-1]], throttled=bool(throttles),
                   throttle_reasons=throttles, clock_readings=len(self.readings))
        if self.sm_max_mhz:
            out["sm_max_mhz"] = self.sm_max_mhz
        return out


class ClockMonitor:
    """Reads the clocks of the CUDA device torch is using; ``read()`` is cheap with NVML."""

    def __init__(self, device_index: int | None = None):
        self.source = "unavailable: not started"
        self._nvml = None
        self._handle = None
        self._smi_id: str | None = None
        self.sm_max_mhz: int | None = None
        self._open(device_index)

    def _open(self, device_index: int | None) -> None:
        import torch

        index = torch.cuda.current_device() if device_index is None else device_index
        props = torch.cuda.get_device_properties(index)
        uuid = uuid_of(props)
        why = []
        try:
            import pynvml

            pynvml.nvmlInit()
            if uuid:
                self._handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            else:
                pci = pci_bus_id_of(props)
                if pci is None:
                    raise RuntimeError("torch gives neither the device UUID nor its PCI bus id")
                self._handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci)
            self._nvml = pynvml
            self.sm_max_mhz = int(pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM))
            self.source = "nvml"
            return
        except ImportError:
            why.append("pynvml (nvidia-ml-py) is not installed")
        except Exception as exc:
            why.append(f"NVML failed: {exc}")
        smi = shutil.which("nvidia-smi")
        if smi is None:
            self.source = "unavailable: " + "; ".join(why + ["nvidia-smi not found"])
            return
        self._smi_id = uuid or str(index)
        try:
            self._read_smi()
            self.source = "nvidia-smi"
        except Exception as exc:
            self._smi_id = None
            self.source = "unavailable: " + "; ".join(why + [f"nvidia-smi failed: {exc}"])

    @property
    def available(self) -> bool:
        return self._nvml is not None or self._smi_id is not None

    @property
    def cheap(self) -> bool:
        """NVML readings cost microseconds; nvidia-smi readings cost a process each."""
        return self._nvml is not None

    def read(self) -> ClockReading | None:
        if self._nvml is not None:
            nv = self._nvml
            reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
            return ClockReading(
                int(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM)),
                int(nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_MEM)),
                int(reasons_fn(self._handle)),
            )
        if self._smi_id is not None:
            return self._read_smi()
        return None

    def _read_smi(self) -> ClockReading:
        out = subprocess.run(
            ["nvidia-smi", "-i", self._smi_id, "--query-gpu=clocks.sm,clocks.mem,clocks_throttle_reasons.active",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip().splitlines()
        return ClockReading(*parse_smi_line(out[0]))

    def log(self) -> ClockLog:
        return ClockLog(self.source, [], self.sm_max_mhz)

    def sample(self, log: ClockLog) -> None:
        reading = self.read()
        if reading is not None:
            log.readings.append(reading)


def driver_version() -> tuple[str, str]:
    """(version, how it was read): the NVIDIA driver release, e.g. ("570.124.06", "nvml")."""
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return (version.decode() if isinstance(version, bytes) else str(version)), "nvml"
    except Exception:
        pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10, check=True).stdout
            return out.strip().splitlines()[0].strip(), "nvidia-smi"
        except Exception:
            pass
    import torch

    api = torch._C._cuda_getDriverVersion() if hasattr(torch._C, "_cuda_getDriverVersion") else 0
    return (f"cuda-api-{api}" if api else "unknown"), "torch (CUDA driver API version, not the release)"


SETTLE_LIMIT_S = 15.0  # the longest a calibration waits for the clocks to recover
SETTLE_QUIET_S = 1.0  # how long no throttling reason may be seen before they count as recovered


def settle(clocks: ClockMonitor, progress: Callable[[str], None] = lambda _: None, limit_s: float = SETTLE_LIMIT_S,
           quiet_s: float = SETTLE_QUIET_S, every_s: float = 0.1,
           now: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Wait until the GPU has left its power cap or thermal limit (no throttling reason for
    ``quiet_s``), at most ``limit_s``. A calibration ends with minutes' worth of matmul power in
    seconds; the first benchmark after it otherwise runs at capped clocks and reads a launch-bound
    kernel as short of its roofline (seen on the H200: 80% where 94% is its steady figure)."""
    if not clocks.available:
        return {"settled": None, "why": clocks.source}
    started = now()
    quiet_since, seen, told = started, set(), False
    while True:
        reading = clocks.read()
        reasons = [r for r in reason_names(reading.reasons) if r in THROTTLING] if reading else []
        t = now()
        if reasons:
            seen.update(reasons)
            quiet_since = t
            if not told:
                progress(f"letting the GPU's clocks recover ({', '.join(reasons)})")
                told = True
        elif t - quiet_since >= quiet_s:
            return {"settled": True, "waited_s": round(t - started, 2), "reasons": sorted(seen)}
        if t - started >= limit_s:
            return {"settled": False, "waited_s": round(t - started, 2), "reasons": sorted(seen)}
        sleep(every_s if clocks.cheap else max(every_s, 0.5))
