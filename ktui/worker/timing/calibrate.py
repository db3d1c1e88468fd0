"""The calibration's measuring half: the measuring process ``python -m ktui.worker.timing.calibrate
[--time S] [--first]``, and what a benchmark asks of it (``for_benchmark``).

The process times copy bandwidth, the launch floor and matmul rates with torch, in one exclusive
turn on the GPU (``gpu_lock``), and keeps the result in the measuring host's per-user folder
(``ktui.measure.calibrate.obtain``, which also makes a second process wait for the first instead of
measuring too). It is never confined and runs no user code. ``ktui calibrate`` starts it (here, or
over ssh with ``--remote``) to measure again; with ``--first`` the process that started a worker
starts it beside the worker (``ktui.dispatch.calibrate``) when the worker's first benchmark on a GPU
kind finds no calibration: it measures only where none is kept. A worker never measures one itself:
its sandbox lets it read the user's calibrations, never write them (``ktui.worker.confine``), so it
asks its parent (``ktui.worker.parent``) and reads what was kept. The process prints what it
measured as JSON lines; the parent reads them with ``ktui.measure.calibrate.read_reply`` and never
imports torch itself.

The device's identity and its measurement are this module's ``identity()`` and
``measure(time_s, progress)``. ``KTUI_CALIBRATION_MEASURE=/path/to/file.py`` names a Python file
that defines both instead: the seam through which the tests give a machine without a GPU a device
to calibrate, and one to measure it differently. The worker and the measuring process both honour it.
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

from ktui.measure.calibrate import MATMUL_DTYPES, Calibration, DeviceIdentity, Obtained, find, obtain
from ktui.measure.stats import StoppingRule, summarize
from ktui.worker.timing import bandwidth as _bandwidth
from ktui.worker.timing import gpu_lock
from ktui.worker.timing import launchfloor as _launchfloor
from ktui.worker.timing.clocks import ClockMonitor, driver_version, settle
from ktui.worker.timing.device_id import mig_of

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

    from ktui.worker.timing.sampler import Flush, Sampler, l2_bytes  # torch: only where a real GPU is measured

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


Ask = Callable[[Callable[[str], None]], Obtained]  # progress → what the measuring process obtained


def for_benchmark(root: Path, progress: Callable[[str], None], ask: Ask | None) -> Obtained:
    """The calibration a benchmark on this device uses: the workspace's, else the user's, else one
    measured now for every workspace and every GPU of its kind on this host — by the measuring
    process, which ``ask`` has the worker's parent start (``ktui.worker.parent.Parent.calibration``),
    its progress told through ``progress`` — and read back from where it was kept. This process
    never measures or keeps one (a worker may not write the user's calibrations); without ``ask``
    the roofline stays provisional and says why."""
    module = measuring()
    try:
        kind = module.identity()
    except Exception as exc:  # no device to key it by: the roofline says it is provisional, and why
        return Obtained(None, note=f"this GPU could not be identified ({type(exc).__name__}: {exc})")
    found = find(root, kind)
    if found.calibration is not None:
        return found
    if ask is None:
        return Obtained(None, note=_joined(found.note, "no process was there to measure it"))
    told = ask(progress)
    note = _joined(found.note, told.note)
    if told.calibration is not None and told.calibration.key != kind.key:
        why = f"the measuring process calibrated {told.calibration.key!r}, not this GPU ({kind.key!r})"
        return Obtained(None, note=_joined(note, why), waited_s=told.waited_s)
    if told.path is None:  # measured, not kept (or not at all): used by this run only
        return Obtained(told.calibration, None, note=note, measured_s=told.measured_s, waited_s=told.waited_s)
    kept = find(None, kind)  # read back as every later run reads it
    if kept.calibration is None:
        why = kept.note or f"{told.path} was kept but cannot be read here"
        return Obtained(told.calibration, None, note=_joined(note, why), measured_s=told.measured_s,
                        waited_s=told.waited_s)
    return Obtained(kept.calibration, kept.path, note=note, measured_s=told.measured_s, waited_s=told.waited_s)


def _joined(*notes: str) -> str:
    """The notes, each once, in order."""
    return "; ".join(dict.fromkeys(n for n in notes if n))


def measure_first(time_s: float, progress: Callable[[str], None]) -> Obtained:
    """What the measuring process does with ``--first``: the user's calibration of this device, or,
    where there is none, one measured now and kept for every workspace (``obtain``: under the
    key's lock, so that two processes measure it once). NoGpu without a device."""
    module = measuring()
    kind = module.identity()
    return obtain(None, kind, lambda told: module.measure(time_s, told), progress)


def main(argv: list[str] | None = None) -> int:
    """The measuring process: ``python -m ktui.worker.timing.calibrate [--time S] [--first]``.

    Measures again (even where a calibration is kept), keeps the result in this host's per-user
    folder, and prints ``{"progress": ...}`` lines, then ``{"calibration": ..., "kept": path}`` or
    ``{"error": ...}``: the parent (``ktui calibrate``) shows it and never imports torch itself.
    With ``--first`` (a worker's first benchmark on this GPU kind) it measures only where none is
    kept, and ends with ``{"obtained": ...}`` (``Obtained.to_json``), what the benchmark uses."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ktui.worker.timing.calibrate")
    parser.add_argument("--time", type=float, default=TIME_S)
    parser.add_argument("--first", action="store_true",
                        help="measure only where none is kept: a worker's first benchmark on this GPU kind")
    args = parser.parse_args(argv)

    def say(record: dict[str, Any]) -> None:
        print(json.dumps(record, default=str), flush=True)

    def told(text: str) -> None:
        say({"progress": text})

    try:
        if args.first:
            say({"obtained": measure_first(args.time, told).to_json()})
            return 0
        module = measuring()
        kind = module.identity()
        got = obtain(None, kind, lambda step: module.measure(args.time, step), told, again=True)
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
