"""Matching a candidate's output against the reference's: structure, shape, dtype, device.

Both the ``run`` and the ``correctness`` rungs need this, and both want the same specific
messages ("output 0 has shape [128, 999] but the reference's has [128, 1000]").
"""

from __future__ import annotations

from typing import Any

import torch

from ktui.worker.errors import RungFailure
from ktui.worker.tier import describe


def flatten(obj: Any) -> list[Any]:
    if isinstance(obj, (tuple, list)):
        return list(obj)
    return [obj]


def pair_outputs(out: Any, ref: Any, device: str, cast_reference: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Pair each output tensor with its reference tensor, or fail with the first mismatch.

    ``cast_reference``: where the problem judges its outputs itself (GPU MODE's
    check_implementation), the output's dtype is the problem's (the buffer it hands in ``data``)
    and a reference that returns another floating dtype (float64 for accuracy) is rounded to it
    for ktui's metrics instead of failing the output."""
    outs, refs = flatten(out), flatten(ref)
    if out is None:
        raise RungFailure("custom_kernel returned None: it must return its output tensor(s)")
    if len(outs) != len(refs):
        raise RungFailure(f"custom_kernel returned {len(outs)} output(s) but the reference returns {len(refs)}")
    pairs = []
    for i, (o, r) in enumerate(zip(outs, refs)):
        name = "output" if len(outs) == 1 else f"output {i}"
        if type(o) is not torch.Tensor:
            if isinstance(o, torch.Tensor):
                raise RungFailure(
                    f"{name} is a {type(o).__name__}, a tensor subclass: return a plain torch.Tensor", status="suspicious"
                )
            raise RungFailure(f"{name} is {describe(o)}, not a torch.Tensor")
        if tuple(o.shape) != tuple(r.shape):
            raise RungFailure(f"{name} has shape {list(o.shape)} but the reference's has {list(r.shape)}")
        if o.dtype != r.dtype and cast_reference and o.dtype.is_floating_point and r.dtype.is_floating_point:
            r = r.to(o.dtype)
        if o.dtype != r.dtype:
            raise RungFailure(
                f"{name} has dtype {str(o.dtype).removeprefix('torch.')} but the reference's is "
                f"{str(r.dtype).removeprefix('torch.')}"
            )
        if o.device.type != device:
            raise RungFailure(f"{name} is on {o.device} but the inputs are on {device}: return it on the inputs' device")
        pairs.append((o, r))
    return pairs
