"""Measuring the memory ceiling: every access pattern of ``ktui.measure.bandwidth`` timed with
ktui's streaming kernels (and torch's ``copy_``), each checked before it is timed. Runs in the
calibration's own process; the figures' bookkeeping stays in ``ktui.measure.bandwidth``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

from ktui.measure.bandwidth import PATTERNS, TORCH_COPY, Pattern, record


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


def measure(size: int, timed: Callable, details: dict[str, Any], progress: Callable[[str], None]) -> float:
    """GB/s of the best pattern over buffers of ``size`` bytes (a whole number of every block),
    filling ``details``; each kernel's result is checked before it is timed."""
    import torch

    patterns = _measure_patterns(size, timed, progress)  # its buffers are freed when it returns
    torch.cuda.empty_cache()
    return record(size, patterns, details)


def _measure_patterns(size: int, timed: Callable, progress: Callable[[str], None], device: str = "cuda",
                      sms: int | None = None) -> dict[str, dict[str, Any]]:
    """Every pattern's record over buffers on ``device`` (the CPU under Triton's interpreter in tests)."""
    import torch

    from ktui.worker.timing import streamkernels as sk

    if sms is None:
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    n = size // sk.ELEMENT_BYTES
    gen = torch.Generator(device=device).manual_seed(0)
    # Small integers: random data (nothing a memory system could compress), exact fp32 sums.
    a = torch.randint(0, 4, (n,), generator=gen, device=device, dtype=torch.float32)
    b = torch.randint(0, 4, (n,), generator=gen, device=device, dtype=torch.float32)
    c = torch.empty_like(a)
    want_sum = float(torch.sum(a, dtype=torch.float64))

    def launch(name: str, config: Any) -> tuple[Any, Callable[[], bool]]:
        c.fill_(math.nan)  # a kernel that skips an element cannot pass the check
        if name == "copy":
            return sk.copy(a, c, config, sms), lambda: torch.equal(c, a)
        if name == "add":
            return sk.add(a, b, c, config, sms), lambda: torch.equal(c, a + b)
        stream, partials = sk.total(a, config, sms)
        return stream, lambda: abs(float(torch.sum(partials, dtype=torch.float64)) - want_sum) <= 1e-6 * want_sum

    def torch_copy() -> tuple[Any, Callable[[], bool]]:
        c.fill_(math.nan)

        def run() -> None:
            c.copy_(a)

        return sk.Stream(run, a.numel() * a.element_size(), c.numel() * c.element_size()), lambda: torch.equal(c, a)

    patterns: dict[str, dict[str, Any]] = {}
    for name, pattern in PATTERNS.items():
        progress(f"bandwidth {pattern.title}: {pattern.reads} read{'s' if pattern.reads > 1 else ''} + "
                 f"{pattern.writes} write{'s' if pattern.writes != 1 else ''} of {size / 2**30:.2f} GiB buffers")
        candidates = [(config.label, functools.partial(launch, name, config)) for config in sk.CONFIGS[name]]
        if name == "copy":
            candidates.append((TORCH_COPY, torch_copy))
        patterns[name] = _best_of(pattern, candidates, timed)
    return patterns


def _best_of(pattern: Pattern, candidates: list, timed: Callable) -> dict[str, Any]:
    """One pattern's record: each candidate checked, then timed; the fastest one's figures."""
    import torch

    each: dict[str, float] = {}
    errors: dict[str, str] = {}
    best: dict[str, Any] = {}
    for label, make in candidates:
        try:
            stream, right = make()
            stream.run()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            if not right():
                raise RuntimeError("computed wrong values")
            seconds, info = timed(stream.run)
        except Exception as exc:  # the other configs and patterns still give a ceiling
            errors[label] = _short(exc)
            continue
        each[label] = stream.counted_bytes / seconds / 1e9
        if each[label] == max(each.values()):
            best = {"kernel": label, "bytes_read": stream.bytes_read, "bytes_written": stream.bytes_written,
                    "counted_bytes": stream.counted_bytes, **info}
    record: dict[str, Any] = {"title": pattern.title, "reads": pattern.reads, "writes": pattern.writes}
    if each:
        record.update(gbs=max(each.values()), **best, each_gbs=each)
    else:
        record["error"] = "; ".join(f"{k}: {v}" for k, v in errors.items())
    if errors:
        record["errors"] = errors
    return record
