"""The launch floor's measuring half: an empty kernel, a tiny copy and copies across sizes, timed
with the benchmark's own sampler inside the calibration's measuring process. The fit and the
file record are parent-safe and live in ``ktui.measure.launchfloor``."""

from __future__ import annotations

from typing import Any, Callable

from ktui.measure.launchfloor import COPY_SIZES, record, size_text


def measure(gbs: float, clocks: Any, time_s: float, progress: Callable[[str], None]) -> dict[str, Any]:
    """Time the empty kernel, the tiny copy and the copies of ``COPY_SIZES`` with the benchmark's
    own timer (read flush before every sample); the ``record`` of them against ``gbs``."""
    import torch

    from ktui.measure.stats import StoppingRule, summarize
    from ktui.worker.timing import floorkernels, streamkernels
    from ktui.worker.timing.sampler import Flush, Sampler

    sampler = Sampler(Flush("read"), clocks)
    rule = StoppingRule(rse_target=0.005, min_samples=20, time_cap_s=time_s)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    config = streamkernels.CONFIGS["copy"][0]

    def median_us(fn: Callable[[], Any]) -> float:
        m = sampler.measure([lambda i: fn()], rule, warmup_s=0.2)
        return summarize(m.calls[0].samples_ms).median * 1e3

    progress("launch floor: an empty kernel")
    empty_us = median_us(floorkernels.empty())
    copies = []
    for size in COPY_SIZES:
        progress(f"launch floor: a copy of {size_text(size)}")
        src = torch.randint(0, 4, (size // streamkernels.ELEMENT_BYTES,), device="cuda", dtype=torch.int32)
        dst = torch.empty_like(src)
        stream = streamkernels.copy(src, dst, config, sms)
        stream.run()
        torch.cuda.synchronize()
        if not torch.equal(src, dst):
            raise RuntimeError(f"the copy of {size_text(size)} computed wrong values")
        copies.append({"bytes": stream.counted_bytes, "measured_us": median_us(stream.run)})
        del src, dst, stream  # the launch holds views of the buffers: free them before the next size
        torch.cuda.empty_cache()
    return record(empty_us, copies[0]["measured_us"], copies, gbs)
