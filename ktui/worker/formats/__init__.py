"""Problem formats: the rungs call one interface whatever shape a problem arrives in.

ktui's own contract (``references/<op>.py`` + ``kernels/<name>.py``), GPU MODE problem folders
(``reference.py`` + ``task.yml`` + ``submission*.py``) and KernelBench pairs (``class Model`` /
``class ModelNew``) all run unchanged. The parent process picks the format from files read as
text (``ktui.workspace.formats``) and carries it in the ``Job``; inside the worker,
``load_problem`` wraps the imported modules in a ``Problem`` (``base``) that every rung uses:
inputs for a shape and a seed, the reference, the candidate, the shapes, and optionally the
problem's own check.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from ktui.protocol.job import GPUMODE, KERNELBENCH, NATIVE

if TYPE_CHECKING:
    from types import ModuleType

    from ktui.protocol.job import Job
    from ktui.worker.formats.base import Problem
    from ktui.worker.tier import Tier


@dataclass(frozen=True)
class FormatSpec:
    name: str
    entry: str  # what the candidate module must define
    entry_text: str  # how a message names it
    adapter: str  # the worker-side module holding ``PROBLEM``


FORMATS: dict[str, FormatSpec] = {
    NATIVE: FormatSpec(NATIVE, "custom_kernel", "function custom_kernel(*inputs)", "ktui.worker.formats.native"),
    GPUMODE: FormatSpec(GPUMODE, "custom_kernel", "function custom_kernel(data)", "ktui.worker.formats.gpumode"),
    KERNELBENCH: FormatSpec(KERNELBENCH, "ModelNew", "class ModelNew(nn.Module)", "ktui.worker.formats.kernelbench"),
}


def spec(name: str) -> FormatSpec:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown problem format {name!r} (known: {', '.join(FORMATS)})") from None


def load_problem(job: Job, tier: Tier, candidate: ModuleType, reference: ModuleType,
                 next_seed: Callable[[], int]) -> Problem:
    """The worker-side adapter for ``job.format``; raises ``RungFailure`` when the problem is malformed."""
    module = importlib.import_module(spec(job.format).adapter)
    return module.PROBLEM(job, tier, candidate, reference, next_seed)
