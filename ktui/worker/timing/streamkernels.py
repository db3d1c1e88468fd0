"""ktui's own streaming kernels, the ones ``ktui calibrate`` measures the memory ceiling with.

A calibrated ceiling must be one an honest memory-bound kernel cannot beat, and HBM sustains
more when reads outnumber writes: on an H200 a plain Triton add (2 reads, 1 write) read 4393
GB/s while torch's 1:1 ``copy_`` reached 4242. So three access patterns are measured, each over
buffers far larger than the L2, and the best sets the ceiling:

- **copy** ``b = a`` (1 read : 1 write), in a few configs: small and large blocks, with and
  without the streaming hints (``evict_first`` loads, ``.cs`` stores), and a persistent
  grid-stride variant;
- **add** ``c = a + b`` (2 reads : 1 write), the shape of the shipped add kernel;
- **sum** of ``a`` into partial sums (read only): persistent programs that each keep a
  block-wide accumulator and write one float at the end, or one program per large block.

Every launcher returns a :class:`Stream` whose byte counts come from the tensors it really reads
and writes. Imported only where the measurement runs (the ``python -m ktui.worker.timing.calibrate``
child process, or a test under Triton's interpreter): it imports Triton and torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import triton
import triton.language as tl

ELEMENT_BYTES = 4  # int32 for the copy (bit-exact), fp32 for add and sum


@dataclass(frozen=True)
class Config:
    """One way to launch a pattern: elements per program and iteration, warps, cache hints, and
    ``per_sm`` programs per multiprocessor looping over the blocks (None: one program per block)."""

    block: int
    warps: int
    hinted: bool = False
    per_sm: int | None = None

    @property
    def label(self) -> str:
        text = f"triton block={self.block * ELEMENT_BYTES // 1024}KiB warps={self.warps}"
        if self.hinted:
            text += " evict_first/.cs"
        if self.per_sm:
            text += f" persistent {self.per_sm}/SM"
        return text


# A small set per pattern; the best one counts. Persistent configs keep 1024 threads or fewer per
# SM so that every program of the grid is resident at once (no second, half-empty wave).
CONFIGS: dict[str, tuple[Config, ...]] = {
    "copy": (Config(2048, 4), Config(16384, 16), Config(8192, 8, hinted=True), Config(4096, 8, per_sm=4)),
    "add": (Config(1024, 4), Config(4096, 8, hinted=True)),
    "sum": (Config(4096, 8, per_sm=4), Config(8192, 8, per_sm=2), Config(16384, 16)),
}
LARGEST_BLOCK = max(c.block for configs in CONFIGS.values() for c in configs)


@dataclass
class Stream:
    """A ready launch: ``run()`` moves ``bytes_read + bytes_written`` bytes through memory."""

    run: Callable[[], Any]
    bytes_read: int
    bytes_written: int

    @property
    def counted_bytes(self) -> int:
        return self.bytes_read + self.bytes_written


@triton.jit
def _load(ptr, offsets, mask, EVEN: tl.constexpr, HINTED: tl.constexpr):
    if EVEN:
        if HINTED:
            value = tl.load(ptr + offsets, eviction_policy="evict_first")
        else:
            value = tl.load(ptr + offsets)
    else:
        if HINTED:
            value = tl.load(ptr + offsets, mask=mask, other=0, eviction_policy="evict_first")
        else:
            value = tl.load(ptr + offsets, mask=mask, other=0)
    return value


@triton.jit
def _store(ptr, offsets, value, mask, EVEN: tl.constexpr, HINTED: tl.constexpr):
    if EVEN:
        if HINTED:
            tl.store(ptr + offsets, value, cache_modifier=".cs")
        else:
            tl.store(ptr + offsets, value)
    else:
        if HINTED:
            tl.store(ptr + offsets, value, mask=mask, cache_modifier=".cs")
        else:
            tl.store(ptr + offsets, value, mask=mask)


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, HINTED: tl.constexpr,
          PERSISTENT: tl.constexpr):
    pid = tl.program_id(0)
    if PERSISTENT:
        step = tl.num_programs(0).to(tl.int64) * BLOCK  # 64-bit offsets throughout
        for start in tl.range(pid.to(tl.int64) * BLOCK, n, step):
            offsets = start + tl.arange(0, BLOCK)
            mask = offsets < n
            _store(dst_ptr, offsets, _load(src_ptr, offsets, mask, EVEN, HINTED), mask, EVEN, HINTED)
    else:
        offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        _store(dst_ptr, offsets, _load(src_ptr, offsets, mask, EVEN, HINTED), mask, EVEN, HINTED)


@triton.jit
def _add(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, HINTED: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = _load(a_ptr, offsets, mask, EVEN, HINTED) + _load(b_ptr, offsets, mask, EVEN, HINTED)
    _store(c_ptr, offsets, total, mask, EVEN, HINTED)


@triton.jit
def _sum(a_ptr, partial_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, HINTED: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    step = tl.num_programs(0).to(tl.int64) * BLOCK
    for start in tl.range(pid.to(tl.int64) * BLOCK, n, step):
        offsets = start + tl.arange(0, BLOCK)
        acc += _load(a_ptr, offsets, offsets < n, EVEN, HINTED)
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


def _programs(config: Config, n_blocks: int, sms: int) -> int:
    return min(n_blocks, config.per_sm * sms) if config.per_sm else n_blocks


def _flat(*tensors: torch.Tensor) -> None:
    n = tensors[0].numel()
    if any(t.numel() != n or not t.is_contiguous() for t in tensors):
        raise ValueError("a streaming kernel needs contiguous buffers of one size")


def copy(src: torch.Tensor, dst: torch.Tensor, config: Config, sms: int) -> Stream:
    """``dst = src`` (4-byte elements, compared bit for bit)."""
    _flat(src, dst)
    s, d = src.view(torch.int32), dst.view(torch.int32)
    n = s.numel()
    n_blocks = triton.cdiv(n, config.block)
    grid = (_programs(config, n_blocks, sms),)
    even = n % config.block == 0

    def run() -> None:
        _copy[grid](s, d, n, BLOCK=config.block, EVEN=even, HINTED=config.hinted,
                    PERSISTENT=bool(config.per_sm), num_warps=config.warps)

    return Stream(run, s.numel() * s.element_size(), d.numel() * d.element_size())


def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: Config, sms: int) -> Stream:
    """``c = a + b`` in fp32, one block per program."""
    _flat(a, b, c)
    if not a.dtype == b.dtype == c.dtype == torch.float32:
        raise ValueError("the streaming add works on fp32 buffers")
    n = a.numel()
    grid = (triton.cdiv(n, config.block),)
    even = n % config.block == 0

    def run() -> None:
        _add[grid](a, b, c, n, BLOCK=config.block, EVEN=even, HINTED=config.hinted, num_warps=config.warps)

    return Stream(run, 2 * n * a.element_size(), n * c.element_size())


def total(a: torch.Tensor, config: Config, sms: int) -> tuple[Stream, torch.Tensor]:
    """The partial sums of fp32 ``a`` (one per program; their sum is ``a.sum()``) and the launch that fills them."""
    _flat(a)
    if a.dtype != torch.float32:
        raise ValueError("the streaming sum works on an fp32 buffer")
    n = a.numel()
    n_blocks = triton.cdiv(n, config.block)
    programs = _programs(config, n_blocks, sms)
    partials = torch.empty(programs, dtype=torch.float32, device=a.device)
    even = n % config.block == 0

    def run() -> None:
        _sum[(programs,)](a, partials, n, BLOCK=config.block, EVEN=even, HINTED=config.hinted,
                          num_warps=config.warps)

    return Stream(run, n * a.element_size(), partials.numel() * partials.element_size()), partials
