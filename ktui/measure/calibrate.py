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
ktui.measure.calibrate``, started by ``ktui calibrate``): the process that shows results never
imports torch or runs a kernel. Results go to ``<root>/.ktui/calibration.json``,
keyed by device name and driver (a driver update can change both), and the benchmark rung uses
them in preference to the datasheet, saying so in its ``ceiling`` figure.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ktui.measure import bandwidth as _bandwidth
from ktui.measure import launchfloor as _launchfloor
from ktui.measure.clocks import ClockMonitor, driver_version
from ktui.measure.devices import lookup
from ktui.measure.roofline import Ceiling
from ktui.measure.stats import StoppingRule, summarize
from ktui.measure.timing import Flush, Sampler, l2_bytes
from ktui.protocol.files import write_atomic
from ktui.protocol.statedir import calibration_file

COPY_MIN_BYTES = 1 << 30  # per buffer; and at least 16× the L2
MATMUL_N = 8192
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


# -- measuring (GPU) ---------------------------------------------------------------------------
def measure(time_s: float = 2.0, progress: Callable[[str], None] = lambda _: None) -> Calibration:
    """Measure copy bandwidth and matmul rates on the current CUDA device."""
    import torch


    if not torch.cuda.is_available():
        raise RuntimeError("calibrate needs a CUDA GPU (torch.cuda.is_available() is False on this machine)")
    device = torch.cuda.get_device_name()
    driver, driver_source = driver_version()
    clocks = ClockMonitor()
    # The buffers are far larger than the L2, so no flush is needed between copies or products.
    sampler = Sampler(Flush("hot"), clocks)
    rule = StoppingRule(rse_target=0.005, min_samples=10, time_cap_s=time_s)
    details: dict[str, Any] = {"clock_source": clocks.source}

    def timed(fn: Callable[[], Any]) -> tuple[float, dict[str, Any]]:
        m = sampler.measure([lambda i: fn()], rule, warmup_s=0.2)
        s = summarize(m.calls[0].samples_ms)
        return s.median * 1e-3, {"median_us": s.median * 1e3, "rse": s.rse_median, "samples": s.n, "stop": m.stop,
                                 **m.clocks.figures()}

    l2, _ = l2_bytes()
    size = max(COPY_MIN_BYTES, 16 * (l2 or 0))
    size -= size % (1 << 20)  # a whole number of every streaming config's blocks
    bandwidth = _bandwidth.measure(size, timed, details, progress)
    launch_floor = _measure_launch_floor(details, bandwidth, clocks, time_s, progress)

    tflops: dict[str, float] = {}
    for key in MATMUL_DTYPES:
        progress(f"matmul {key}: {MATMUL_N}³")
        try:
            fn = _matmul(key, MATMUL_N)
            seconds, info = timed(fn)
            tflops[key] = 2 * MATMUL_N**3 / seconds / 1e12
            details[f"matmul_{key}"] = {"n": MATMUL_N, **info}
        except Exception as exc:
            details[f"matmul_{key}"] = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
        finally:
            torch.cuda.empty_cache()
    return Calibration(
        device=device,
        driver=driver,
        driver_source=driver_source,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        torch=torch.__version__,
        bandwidth_gbs=bandwidth if math.isfinite(bandwidth) else None,
        tflops=tflops,
        details=details,
        launch_floor=launch_floor,
    )


def _measure_launch_floor(details: dict[str, Any], bandwidth: float, clocks: ClockMonitor, time_s: float,
                          progress: Callable[[str], None]) -> dict[str, Any]:
    """The launch floor fitted against the 1:1 copy's bandwidth (the copies it times are 1:1),
    or ``{"error": …}``: the other ceilings stand without it."""
    import torch

    copy = details.get("bandwidth_patterns", {}).get("copy", {})
    gbs = copy.get("gbs") or bandwidth
    if not gbs or not math.isfinite(gbs):
        return {"error": "no copy bandwidth was measured to fit the launch floor against"}
    try:
        return _launchfloor.measure(gbs, clocks, time_s, progress)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
    finally:
        torch.cuda.empty_cache()


def _matmul(key: str, n: int) -> Callable[[], Any]:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    if key == "fp8":
        if not hasattr(torch, "_scaled_mm"):
            raise RuntimeError("this torch has no torch._scaled_mm")
        a = torch.randn(n, n, device="cuda", generator=gen).to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda", generator=gen).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt needs
        one = torch.ones((), device="cuda")

        def product() -> Any:  # fast accumulation: the fastest mode is the ceiling
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)

        product()  # fails here, not in the timer, where the device or torch cannot do it
        return product
    dtype = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
             "bf16": torch.bfloat16}[key]
    a = torch.randn(n, n, device="cuda", generator=gen, dtype=dtype)
    b = torch.randn(n, n, device="cuda", generator=gen, dtype=dtype)
    allow = key == "tf32"

    def product() -> Any:
        saved = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = allow
        try:
            return a @ b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = saved

    return product


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
    """Read the measuring process's lines (``main``'s protocol), telling its progress as it comes."""
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


def main(argv: list[str] | None = None) -> int:
    """The measuring process: ``python -m ktui.measure.calibrate [--time S]``.

    Prints ``{"progress": ...}`` lines, then ``{"calibration": ...}`` or ``{"error": ...}``: the
    parent (``ktui calibrate``) saves and shows the result and never imports torch itself."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m ktui.measure.calibrate")
    parser.add_argument("--time", type=float, default=2.0)
    args = parser.parse_args(argv)

    def say(record: dict[str, Any]) -> None:
        print(json.dumps(record, default=str), flush=True)

    try:
        import torch

        if not torch.cuda.is_available():
            say({"error": "calibrate needs a CUDA GPU (torch.cuda.is_available() is False on this machine)",
                 "no_gpu": True})
            return 2
        result = measure(args.time, lambda text: say({"progress": text}))
    except Exception as exc:
        say({"error": f"{type(exc).__name__}: {exc}" if not isinstance(exc, RuntimeError) else str(exc)})
        return 2
    say({"calibration": asdict(result)})
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
