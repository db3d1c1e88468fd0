"""``ktui calibrate``: this device's real ceilings, measured once and cached.

Datasheet peaks are not reachable: a copy reaches ~85-93% of the HBM peak, a matmul ~70-85% of
the tensor-core peak. A kernel "at 80% of roofline" against the datasheet may already be as fast
as the device allows. So ktui measures two ceilings the way a kernel would meet them:

- **memory bandwidth**: the best a streaming kernel reaches over buffers far larger than the L2,
  counting the bytes each really reads and writes: ktui's own Triton kernels for a 1:1 copy, a
  2-read-1-write add and a read-only sum, and torch's ``copy_`` (``ktui.measure.bandwidth``), each
  pattern kept in the details, so that no honest memory-bound kernel reads more than 100% of it;
- **matmul rate** per dtype through torch (cuBLAS): a square product large enough to fill the
  device, ``2·n³ / time``, for fp64, fp32 (TF32 off), tf32, fp16, bf16 and fp8 where supported;
- **launch floor** (``ktui.measure.launchfloor``): the shortest launch to completion, and which
  model of floor and transfer fits copies from tiny to large, stored as ``launch_floor``.

Both are timed with the benchmark's own timer, in a process of its own (``python -m
ktui.worker.timing.calibrate``, started by ``ktui calibrate``): the process that shows results
(this module: the file, the report, the measuring process's replies) never imports torch or runs
a kernel. Results go to ``<root>/.ktui/calibration.json``,
keyed by device name and driver (a driver update can change both), and the benchmark rung uses
them in preference to the datasheet, saying so in its ``ceiling`` figure.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ktui.measure import bandwidth as _bandwidth
from ktui.measure import launchfloor as _launchfloor
from ktui.measure.datasheets import lookup
from ktui.measure.roofline import Ceiling
from ktui.protocol.files import write_atomic
from ktui.protocol.statedir import calibration_file

MATMUL_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


class CalibrationError(Exception):
    """The calibration file exists but cannot be used."""


@dataclass
class Calibration:
    device: str
    driver: str
    driver_source: str
    date: str
    torch: str
    bandwidth_gbs: float | None
    tflops: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)  # sizes, samples, errors per measurement
    launch_floor: dict[str, Any] = field(default_factory=dict)  # ``launchfloor.record``; {}: saved before it

    @property
    def key(self) -> str:
        return device_key(self.device, self.driver)

    def ceiling(self) -> Ceiling:
        note = f"calibrated {self.date[:10]}"
        sources = {k: note for k in self.tflops}
        if self.bandwidth_gbs:
            sources["bandwidth"] = note + _bandwidth.source_note(self.details)
        return Ceiling(self.device, self.bandwidth_gbs, dict(self.tflops), sources, _bandwidth.mixes(self.details),
                       _launchfloor.from_record(self.launch_floor, note))


def device_key(device: str, driver: str) -> str:
    return f"{device} | driver {driver}"


def path_for(root: Path) -> Path:
    return calibration_file(root)


def _read_all(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path} cannot be read ({exc}); run `ktui calibrate` again") from exc
    if not isinstance(data, dict):
        raise CalibrationError(f"{path} does not hold a JSON object; run `ktui calibrate` again")
    return data


def load(root: Path, device: str, driver: str) -> Calibration | None:
    """The cached calibration of this device and driver, or None if there is none."""
    entry = _read_all(path_for(root)).get(device_key(device, driver))
    if entry is None:
        return None
    try:
        return Calibration(**entry)
    except TypeError as exc:
        raise CalibrationError(f"{path_for(root)}: the entry for {device_key(device, driver)!r} is malformed ({exc})") from exc


def newest_for_device(root: Path, device: str) -> Calibration | None:
    """This device's newest calibration whatever its driver (the roofline chart draws the GPU's
    ceilings without knowing which driver the parent runs under), or None."""
    found = []
    for key, entry in _read_all(path_for(root)).items():
        if isinstance(entry, dict) and entry.get("device") == device:
            try:
                found.append(Calibration(**entry))
            except TypeError as exc:
                raise CalibrationError(f"{path_for(root)}: the entry for {key!r} is malformed ({exc})") from exc
    return max(found, key=lambda cal: cal.date) if found else None


def save(root: Path, calibration: Calibration) -> Path:
    """Write (or replace) this device's entry, keeping other devices' entries."""

    path = path_for(root)
    try:
        data = _read_all(path)
    except CalibrationError:
        data = {}  # a corrupt file is replaced by a good one
    data[calibration.key] = asdict(calibration)
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True))
    return path


def describe(cal: Calibration) -> list[str]:
    """Human lines: each ceiling, and its share of the datasheet peak where the device is known."""

    spec = lookup(cal.device)
    lines = [f"{cal.device} · driver {cal.driver} ({cal.driver_source}) · torch {cal.torch} · {cal.date}"]
    if spec is None:
        lines.append("  (not in the datasheet table: no peak to compare with)")
    lines += _bandwidth.describe(cal.bandwidth_gbs, cal.details, spec.bandwidth_gbs if spec else None)
    for key in MATMUL_DTYPES:
        info = cal.details.get(f"matmul_{key}", {})
        if key in cal.tflops:
            peak = spec.tflops.get(key) if spec else None
            share = f" = {cal.tflops[key] / peak:.0%} of the datasheet {peak:g}" if peak else ""
            lines.append(f"  matmul {key:<5}     {cal.tflops[key]:8.1f} TFLOP/s{share} ({info.get('n')}³, ±{info.get('rse', 0):.2%})")
        elif "error" in info:
            lines.append(f"  matmul {key:<5}     not measured: {info['error']}")
    return lines + _launchfloor.describe(cal.launch_floor)


@dataclass
class Reply:
    """What the measuring process said: its calibration's fields, or why there is none."""

    record: dict[str, Any] | None = None
    error: str = ""
    no_gpu: bool = False


def read_reply(lines: Iterable[str], progress: Callable[[str], None]) -> Reply:
    """Read the measuring process's lines (``ktui.worker.timing.calibrate.main``'s protocol), telling
    its progress as it comes."""
    reply = Reply()
    for line in lines:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(message, dict):
            continue
        if "progress" in message:
            progress(str(message["progress"]))
        elif isinstance(message.get("calibration"), dict):
            reply.record = message["calibration"]
        elif "error" in message:
            reply.error, reply.no_gpu = str(message["error"]), bool(message.get("no_gpu"))
    return reply
