"""The tier a worker tells, named with the sandbox where the sandbox is why CUDA did not start.

Torch-free (the tier itself is a value): a unit test and the worker's entry read it alike."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ktui.protocol import processes

if TYPE_CHECKING:
    from ktui.worker.tier import Tier


def sandbox_named(tier: Tier, confined: bool) -> Tier:
    """A GPU that CUDA could not start inside the sandbox is said to be the sandbox's doing, with
    the way out: the run goes on on the CPU tier, and its header must not read as a GPU-less machine."""
    if confined and not tier.is_gpu and "CUDA did not start" in tier.device:
        return dataclasses.replace(tier, device=tier.device.rstrip(")") + "; inside ktui's sandbox: "
                                   f"{processes.NO_CONFINE_ENV}=1 runs without it, docs/sandbox.md)")
    return tier
