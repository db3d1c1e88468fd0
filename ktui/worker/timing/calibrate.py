"""The calibration's measuring process: ``python -m ktui.worker.timing.calibrate [--time S]``,
started by ``ktui calibrate`` (and over ssh by ``--remote``). It times copy bandwidth, the launch
floor and matmul rates with torch and prints them as JSON lines; the parent reads them with
``ktui.measure.calibrate.read_reply``, saves and shows them, and never imports torch itself.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict
from typing import Any, Callable

from ktui.measure.calibrate import MATMUL_DTYPES, Calibration
from ktui.measure.stats import StoppingRule, summarize
from ktui.worker.timing import bandwidth as _bandwidth
from ktui.worker.timing import gpu_lock
from ktui.worker.timing import launchfloor as _launchfloor
from ktui.worker.timing.clocks import ClockMonitor, driver_version
from ktui.worker.timing.sampler import Flush, Sampler, l2_bytes

COPY_MIN_BYTES = 1 << 30  # per buffer; and at least 16× the L2
MATMUL_N = 8192


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

    gpu = gpu_lock.device_key()

    def timed(fn: Callable[[], Any]) -> tuple[float, dict[str, Any]]:
        with gpu_lock.take(gpu):  # one measurement at a time on this GPU, with every ktui process
            m = sampler.measure([lambda i: fn()], rule, warmup_s=0.2)
        s = summarize(m.calls[0].samples_ms)
        return s.median * 1e-3, {"median_us": s.median * 1e3, "rse": s.rse_median, "samples": s.n, "stop": m.stop,
                                 **m.clocks.figures()}

    l2, _ = l2_bytes()
    size = max(COPY_MIN_BYTES, 16 * (l2 or 0))
    size -= size % (1 << 20)  # a whole number of every streaming config's blocks
    bandwidth = _bandwidth.measure(size, timed, details, progress)
    with gpu_lock.take(gpu):
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


def main(argv: list[str] | None = None) -> int:
    """The measuring process: ``python -m ktui.worker.timing.calibrate [--time S]``.

    Prints ``{"progress": ...}`` lines, then ``{"calibration": ...}`` or ``{"error": ...}``: the
    parent (``ktui calibrate``) saves and shows the result and never imports torch itself."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m ktui.worker.timing.calibrate")
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
