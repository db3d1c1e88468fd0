"""KernelBench pairs, run as they are: a problem file with ``class Model(nn.Module)``,
``get_inputs()`` and ``get_init_inputs()``; a candidate with ``class ModelNew``.

Both models are built once per run from ``get_init_inputs()``, each right after
``torch.manual_seed(s)`` with the same ``s`` (as KernelBench does, so layers created in the same
order get the same initial weights). When ``ModelNew``'s state_dict has exactly ``Model``'s keys,
shapes and dtypes, ``Model``'s weights are also copied into it, so a candidate that creates its
layers in another order is still compared on equal weights; the pre-checks message says which
of the two happened. The problem has no shapes: correctness runs ``TRIALS`` times on fresh
``get_inputs()`` (the global torch seed set to a new value each time, the tensors made directly
on the run's device), the benchmark once.
"""

from __future__ import annotations

from typing import Any

import torch

from ktui.worker.formats.base import Problem
from ktui.worker.tier import cuda_mapped_to

TRIALS = 5
REQUIRED_IN_PROBLEM = ("Model", "get_inputs", "get_init_inputs")


class KernelBenchProblem(Problem):
    format = "kernelbench"

    def __init__(self, job, tier, candidate, reference, next_seed):
        super().__init__(job, tier, candidate, reference, next_seed)
        self.require(REQUIRED_IN_PROBLEM, what="KernelBench problem")
        self.tests = [{"trial": i} for i in range(1, TRIALS + 1)]
        self.benchmarks = [{}]
        self.declares_shapes = False  # one size, get_inputs()'s: no shape to derive fresh ones from
        seed = next_seed()
        self.model_new = None  # ``ktui audit`` loads a problem with no candidate
        with self.scope():
            init = list(reference.get_init_inputs())
            torch.manual_seed(seed)
            self.model = reference.Model(*init)
            if candidate is not None:
                torch.manual_seed(seed)
                self.model_new = candidate.ModelNew(*init)
        weights = copy_weights(self.model, self.model_new) if self.model_new is not None else "no candidate"
        # Left in training mode, as KernelBench's own evaluator leaves them: BatchNorm and
        # InstanceNorm then normalise with the batch's statistics. In eval mode a fresh BatchNorm
        # is the identity, so a copy of the input would pass for it.
        self.model.to(tier.torch_device)
        if self.model_new is not None:
            self.model_new.to(tier.torch_device)
        self.figures = {"weights": weights, "weight_seed": seed, "init_inputs": len(init)}
        self.notes.append(WEIGHT_NOTES[weights].format(seed=seed))
        if not tier.is_gpu:
            self.notes.append(f"CPU tier: tensors the problem's code puts on 'cuda' are made on '{tier.torch_device}'")

    def generate(self, shape: dict, seed: int) -> tuple:
        # Made where they will be used: get_inputs() builds on the default device, and a 6 GB
        # torch.rand on the host takes seconds where the GPU takes milliseconds.
        torch.manual_seed(seed)
        with torch.device(self.tier.torch_device):
            return tuple(self.reference.get_inputs())

    def describe_generate(self, shape: dict, seed: int) -> str:
        return f"get_inputs() (after torch.manual_seed({seed}))"

    @property
    def reference_call(self) -> str:
        return "Model.forward"

    def ref_kernel(self, *inputs: Any) -> Any:
        with torch.no_grad():
            return self.model(*inputs)

    def custom_kernel(self, *inputs: Any) -> Any:
        with torch.no_grad():
            return self.model_new(*inputs)

    def scope(self):
        if self.tier.is_gpu:
            return super().scope()
        return cuda_mapped_to(self.tier.torch_device)


WEIGHT_NOTES = {
    "copied": "Model's weights copied into ModelNew (same state_dict layout), both built after torch.manual_seed({seed})",
    "seeded": "ModelNew's state_dict differs from Model's, so weights are not copied: both built after "
              "torch.manual_seed({seed}), they match only if created in the same order and shapes",
    "none": "no weights: Model has an empty state_dict",
    "no candidate": "no candidate (an audit of the problem): Model built after torch.manual_seed({seed})",
}


def copy_weights(model: torch.nn.Module, model_new: torch.nn.Module) -> str:
    """``copied`` when ModelNew's state_dict matches Model's key for key; else ``seeded`` (or ``none``)."""
    src, dst = model.state_dict(), model_new.state_dict()
    if not src:
        return "none"
    same = src.keys() == dst.keys() and all(
        src[k].shape == dst[k].shape and src[k].dtype == dst[k].dtype for k in src
    )
    if not same:
        return "seeded"
    model_new.load_state_dict(src)
    return "copied"


PROBLEM = KernelBenchProblem
