"""The tier a run happens on, and the device chores every rung needs.

Three tiers, each honest about what it ran: ``gpu`` (a local CUDA device: everything runs there),
``cpu`` (no GPU: Triton kernels run in Triton's interpreter on CPU tensors, kernels are compiled
ahead of time for ``--arch``, nothing is timed), and later a remote GPU behind the same runner.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import reprlib
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ktui.worker import metrics

DEFAULT_ARCH = "sm_90a"


@dataclass(frozen=True)
class Tier:
    name: str  # "gpu" | "cpu"
    device: str  # human name: "NVIDIA H200" or "CPU (Triton interpreter)"
    arch: str  # compile target, e.g. "sm_90a"
    torch_device: str  # "cuda" | "cpu"

    @property
    def is_gpu(self) -> bool:
        return self.name == "gpu"

    @property
    def capability(self) -> int:
        return arch_capability(self.arch)


def arch_capability(arch: str) -> int:
    """``sm_90a`` → 90."""
    match = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if not match:
        raise ValueError(f"unknown architecture {arch!r}: expected a name like sm_90a or sm_80")
    return int(match.group(1))


def local_arch(major: int, minor: int) -> str:
    """The target Triton and CuTeDSL build for a device: Hopper and later use the 'a' features."""
    cap = major * 10 + minor
    return f"sm_{cap}a" if major >= 9 else f"sm_{cap}"


def detect(arch: str | None = None, force_cpu: bool = False) -> Tier:
    if not force_cpu and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return Tier("gpu", torch.cuda.get_device_name(), local_arch(major, minor), "cuda")
    target = arch or DEFAULT_ARCH
    arch_capability(target)
    why = "" if force_cpu else cuda_failure()
    device = f"CPU (Triton interpreter; CUDA did not start: {why})" if why else "CPU (Triton interpreter)"
    return Tier("cpu", device, target, "cpu")


def cuda_failure() -> str:
    """Why CUDA did not start on a machine with an NVIDIA device ("" where there is none): such a
    worker runs the CPU tier, and its header says why instead of passing for a machine without a GPU."""
    if not os.path.exists("/dev/nvidiactl"):
        return ""
    try:
        torch.cuda.init()
    except Exception as exc:
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return "torch.cuda.is_available() is False"


def to_device(obj: Any, device: str) -> Any:
    """Move every tensor inside ``obj`` (tuples, lists, dicts) to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj if obj.device.type == device else obj.to(device)
    if isinstance(obj, tuple):
        return tuple(to_device(x, device) for x in obj)
    if isinstance(obj, list):
        return [to_device(x, device) for x in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def tensorless(inputs: tuple) -> str:
    """What a generator returned, in words, when it holds no tensor ("" when it holds one): a
    kernel handed ``None`` or a number would fail at its own line and take the blame."""
    if tensors_in(inputs):
        return ""
    value = inputs[0] if len(inputs) == 1 else inputs  # a lone value was wrapped in a tuple for the call
    if value is None:
        return "None"
    kinds = sorted({type(v).__name__ for v in value}) if isinstance(value, (tuple, list)) else []
    of = f" of {', '.join(kinds)}" if kinds else ""
    return f"{reprlib.repr(value)} ({type(value).__name__}{of})"


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """Every tensor inside ``obj`` (tuples, lists, dicts), in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for x in obj for t in tensors_in(x)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in tensors_in(x)]
    return []


def storage_key(t: torch.Tensor) -> int | None:
    """The identity of a tensor's memory: its storage's base address (views share it); None for
    tensors with no storage (meta, fake) or none allocated."""
    try:
        return t.untyped_storage().data_ptr() or None
    except (RuntimeError, NotImplementedError):
        return None


def storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    """``[start, end)`` of the bytes of a tensor's whole storage."""
    start = storage_key(t)
    return (start, start + max(t.untyped_storage().nbytes(), 1)) if start else None


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two non-empty tensors are views of one storage."""
    if not a.numel() or not b.numel() or a.device != b.device:
        return False
    key = storage_key(a)
    return key is not None and key == storage_key(b)


def same_values(a: Any, b: Any) -> bool:
    """The tensors in ``a`` and ``b`` are equal one by one, shapes, dtypes and values, NaN equal to NaN.

    Compared a chunk at a time (``metrics.flat_chunks``): the masks of a whole 8 GB input would
    take another 8 GB, a peak of the checked call's own size.
    """
    left, right = tensors_in(a), tensors_in(b)
    if len(left) != len(right):
        return False
    for x, y in zip(left, right):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        pieces = zip(metrics.flat_chunks(x), metrics.flat_chunks(y))
        if not all(_equal_piece(p, q) for (_, p), (_, q) in pieces):
            return False
    return True


def _equal_piece(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all())
    return torch.equal(x, y)


def clone_tree(obj: Any) -> Any:
    """A private deep copy of the tensors in ``obj``, for the reference and the mutation check."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, tuple):
        return tuple(clone_tree(x) for x in obj)
    if isinstance(obj, list):
        return [clone_tree(x) for x in obj]
    if isinstance(obj, dict):
        return {k: clone_tree(v) for k, v in obj.items()}
    return obj


def synchronize(tier: Tier) -> None:
    if tier.is_gpu:
        torch.cuda.synchronize()


def device_usable(tier: Tier) -> bool:
    """Whether the device still runs work: after a sticky CUDA error (an illegal memory access)
    every later call fails, wherever it was made."""
    try:
        synchronize(tier)
        return True
    except Exception:
        return False


# Quiet NaNs with a payload no arithmetic produces: an element still holding one was never
# written by the kernel (a computed NaN has the canonical payload).
POISON_BITS: dict[torch.dtype, tuple[torch.dtype, int]] = {
    torch.float32: (torch.int32, 0x7FC0DEAD),
    torch.float64: (torch.int64, 0x7FF8DEADDEADDEAD),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
}


def poison_value(dtype: torch.dtype) -> float | int | bool:
    """What unwritten output memory holds where no signature NaN exists for the dtype."""
    if dtype.is_floating_point or dtype.is_complex:
        return math.nan
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).min


def fill_poison(t: torch.Tensor) -> torch.Tensor:
    if not t.numel():
        return t
    signature = POISON_BITS.get(t.dtype)
    if signature is not None and t.is_contiguous():
        t.view(signature[0]).fill_(signature[1])
    else:
        t.fill_(poison_value(t.dtype))
    return t


def unwritten(t: torch.Tensor) -> int:
    """How many elements of ``t`` still hold the signature poison (never written)."""
    signature = POISON_BITS.get(t.dtype)
    if signature is None or not t.is_contiguous() or not t.numel():
        return 0
    return int((t.view(signature[0]) == signature[1]).sum())


def holds_only_poison(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` still holds what ``fill_poison`` wrote (never written since).

    Exact for the dtypes with a signature NaN; for integers, every element at the dtype's minimum;
    a boolean tensor can hold nothing recognisable, so it never counts."""
    if not t.numel() or t.dtype == torch.bool:
        return False
    if t.dtype in POISON_BITS and t.is_contiguous():
        return unwritten(t) == t.numel()
    if t.dtype.is_floating_point or t.dtype.is_complex:
        return False
    return bool((t == poison_value(t.dtype)).all())


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Make ``torch.empty*`` return poisoned memory while the candidate runs.

    A kernel that forgets to write part of its output would otherwise often pass, because a
    fresh allocation can hold zeros or the previous answer. With poisoned memory every
    unwritten element is NaN (or an extreme integer) and the comparison fails on it.
    """
    saved = {name: getattr(torch, name) for name in ("empty", "empty_like", "empty_strided")}
    saved_new_empty = torch.Tensor.new_empty

    def wrap(fn):
        def poisoned(*args, **kwargs):
            return fill_poison(fn(*args, **kwargs))

        poisoned.__wrapped__ = fn
        return poisoned

    try:
        for name, fn in saved.items():
            setattr(torch, name, wrap(fn))
        torch.Tensor.new_empty = wrap(saved_new_empty)
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        torch.Tensor.new_empty = saved_new_empty


def describe(obj: Any) -> str:
    """Short description of an output for messages: ``Tensor(float32, [128, 1000], cuda:0)``."""
    if isinstance(obj, torch.Tensor):
        return f"Tensor({str(obj.dtype).removeprefix('torch.')}, {list(obj.shape)}, {obj.device})"
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__} of {len(obj)}"
    return type(obj).__name__


@contextlib.contextmanager
def cuda_mapped_to(device: str) -> Iterator[None]:
    """Run problem code written for a GPU on the CPU tier: what it asks to create on "cuda" is
    made on ``device`` instead.

    GPU MODE generators write ``torch.randn(..., device="cuda", generator=torch.Generator(device="cuda"))``
    and submissions allocate with ``device="cuda"``. While this context is active: ``device=``
    arguments naming CUDA (tensor factories, ``Tensor.to``, ``new_*``) and ``Tensor.cuda()`` go to
    ``device``; ``torch.Generator(device="cuda")`` makes a generator on ``device``; and
    ``torch.cuda.synchronize()`` returns at once (CPU work is done when a call returns). Nothing
    else changes: ``torch.cuda.is_available()`` still says False and results say "cpu".
    """
    from torch.overrides import TorchFunctionMode

    def is_cuda(d: Any) -> bool:
        if isinstance(d, torch.device):
            return d.type == "cuda"
        return isinstance(d, str) and d.split(":", 1)[0] == "cuda"

    class CudaToDevice(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if is_cuda(kwargs.get("device")):
                kwargs = {**kwargs, "device": device}
            if func is torch.Tensor.cuda:
                return args[0].to(device)
            if func is torch.Tensor.to and any(is_cuda(a) for a in args[1:]):
                args = tuple(device if is_cuda(a) else a for a in args)
            return func(*args, **kwargs)

    real_generator = torch.Generator

    class Generator(real_generator):  # a real torch.Generator, made on ``device`` when CUDA is asked for
        def __new__(cls, device_arg: Any = "cpu", *, device: Any = None):
            where = device if device is not None else device_arg
            return real_generator.__new__(cls, device=_mapped(where))

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    def _mapped(where: Any) -> Any:
        return device if is_cuda(where) else where

    real_sync = torch.cuda.synchronize
    torch.Generator = Generator
    torch.cuda.synchronize = lambda *args, **kwargs: None
    try:
        with CudaToDevice():
            yield
    finally:
        torch.Generator = real_generator
        torch.cuda.synchronize = real_sync
