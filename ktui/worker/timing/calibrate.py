"""The calibration's measuring half: what the first benchmark on a GPU kind with no calibration
runs inline (``for_benchmark``), and the measuring process ``python -m ktui.worker.timing.calibrate
[--time S]`` that ``ktui calibrate`` starts (here, or over ssh with ``--remote``). Both time copy
bandwidth, the launch floor and matmul rates with torch, in one exclusive turn on the GPU
(``gpu_lock``), and keep the result in the measuring host's per-user folder
(``ktui.measure.calibrate.obtain``, which also makes a second process wait for the first instead of
measuring too). The process prints what it measured as JSON lines; the parent reads them with
``ktui.measure.calibrate.read_reply`` and never imports torch itself.

The device's identity and its measurement are this module's ``identity()`` and
``measure(time_s, progress)``. ``KTUI_CALIBRATION_MEASURE=/path/to/file.py`` names a Python file
that defines both instead: the seam through which the tests give a machine without a GPU a device
to calibrate, and one to measure it differently.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.util
import json
import math
import os
import sys
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ktui.measure.calibrate import MATMUL_DTYPES, Calibration, DeviceIdentity, Obtained, obtain
from ktui.measure.stats import StoppingRule, summarize
from ktui.worker.timing import bandwidth as _bandwidth
from ktui.worker.timing import gpu_lock
from ktui.worker.timing import launchfloor as _launchfloor
from ktui.worker.timing.clocks import ClockMonitor, driver_version, settle
from ktui.worker.timing.device_id import mig_of
from ktui.worker.timing.sampler import Flush, Sampler, l2_bytes

MEASURE_ENV = "KTUI_CALIBRATION_MEASURE"  # a Python file defining identity() and measure(time_s, progress)
TIME_S = 2.0  # the sampling cap per measurement, the benchmark's and ``ktui calibrate``'s default
NO_GPU = "calibrate needs a CUDA GPU (torch.cuda.is_available() is False on this machine)"
COPY_MIN_BYTES = 1 << 30  # per buffer; and at least 16× the L2
MATMUL_N = 8192


class NoGpu(RuntimeError):
    """There is no CUDA device to calibrate here."""


def identity() -> DeviceIdentity:
    """The current CUDA device's kind: its name, the driver and its MIG profile (NoGpu without one)."""
    import torch

    if not torch.cuda.is_available():
        raise NoGpu(NO_GPU)
    return _kind(torch.cuda.current_device())


@functools.cache
def _kind(index: int) -> DeviceIdentity:
    """Read once a process: nothing of it changes while the process holds a CUDA context."""
    import torch

    device, mig = mig_of(torch.cuda.get_device_name(index), torch.cuda.get_device_properties(index),
                         os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    return DeviceIdentity(device, driver_version()[0], mig)


def measure(time_s: float = TIME_S, progress: Callable[[str], None] = lambda _: None) -> Calibration:
    """Measure copy bandwidth, the launch floor and matmul rates on the current CUDA device, in one
    turn that has the GPU to itself across every ktui process (``gpu_lock.take``)."""
    import torch

    kind = identity()
    with gpu_lock.take(gpu_lock.device_key()) as turn:
        calibration = _measured(kind, time_s, progress)
    if turn.figures():  # it waited for its turn, or measured without one: the details say so
        calibration.details["gpu_lock"] = turn.figures()
    torch.cuda.empty_cache()  # the buffers were ktui's, not the run's: give their memory back
    return calibration


def _measured(kind: DeviceIdentity, time_s: float, progress: Callable[[str], None]) -> Calibration:
    import torch

    _, driver_source = driver_version()
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
    details["settled"] = settle(clocks, progress)
    return Calibration(
        device=kind.device,
        driver=kind.driver,
        driver_source=driver_source,
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        torch=torch.__version__,
        bandwidth_gbs=bandwidth if math.isfinite(bandwidth) else None,
        tflops=tflops,
        details=details,
        launch_floor=launch_floor,
        mig=kind.mig,
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


def measuring() -> ModuleType:
    """The module whose ``identity()`` and ``measure(time_s, progress)`` calibrate a device: this
    one, or the file ``KTUI_CALIBRATION_MEASURE`` names."""
    given = os.environ.get(MEASURE_ENV)
    if not given:
        return sys.modules[__name__]
    spec = importlib.util.spec_from_file_location("ktui_calibration_measure", Path(given))
    if spec is None or spec.loader is None or not Path(given).is_file():
        raise RuntimeError(f"{MEASURE_ENV}={given}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def for_benchmark(root: Path, progress: Callable[[str], None]) -> Obtained:
    """The calibration a benchmark on this device uses: the workspace's, else the user's, else
    measured now, once for every workspace and every GPU of its kind on this host, its progress
    told through ``progress``."""
    module = measuring()
    try:
        kind = module.identity()
    except Exception as exc:  # no device to key it by: the roofline says it is provisional, and why
        return Obtained(None, note=f"this GPU could not be identified ({type(exc).__name__}: {exc})")
    return obtain(root, kind, lambda told: module.measure(TIME_S, told), progress)


def main(argv: list[str] | None = None) -> int:
    """The measuring process: ``python -m ktui.worker.timing.calibrate [--time S]``.

    Measures again (even where a calibration is kept), keeps the result in this host's per-user
    folder, and prints ``{"progress": ...}`` lines, then ``{"calibration": ..., "kept": path}`` or
    ``{"error": ...}``: the parent (``ktui calibrate``) shows it and never imports torch itself."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ktui.worker.timing.calibrate")
    parser.add_argument("--time", type=float, default=TIME_S)
    args = parser.parse_args(argv)

    def say(record: dict[str, Any]) -> None:
        print(json.dumps(record, default=str), flush=True)

    try:
        module = measuring()
        kind = module.identity()
        got = obtain(None, kind, lambda told: module.measure(args.time, told), lambda text: say({"progress": text}),
                     again=True)
    except NoGpu as exc:
        say({"error": str(exc), "no_gpu": True})
        return 2
    except Exception as exc:
        say({"error": f"{type(exc).__name__}: {exc}" if not isinstance(exc, RuntimeError) else str(exc)})
        return 2
    if got.calibration is None:
        say({"error": got.note})
        return 2
    say({"calibration": asdict(got.calibration), "kept": str(got.path or ""), "note": got.note})
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
