"""State shared by the rungs of one run, inside the worker process.

The ladder fills it as it climbs: pre-checks load the modules, compile records what was built,
later rungs read both. Rungs never talk to each other directly.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Iterator

import torch

from ktui.protocol.events import Event
from ktui.protocol.job import Job
from ktui.worker import integrity, provenance
from ktui.worker.dsl.base import Dsl
from ktui.worker.dsl.registry import DSLS
from ktui.worker.errors import RungFailure
from ktui.worker.formats.base import Problem
from ktui.worker.outcome import CompiledFunction, InputGenerationError, ReferenceFault
from ktui.worker.outputs import flatten, pair_outputs
from ktui.worker.phases import Phases
from ktui.worker.seeds.ranges import SeedRange, fresh_range
from ktui.worker.tier import (
    Tier,
    clone_tree,
    device_usable,
    poisoned_allocations,
    storage_key,
    synchronize,
    tensorless,
    to_device,
)


@dataclass
class CheckedCall:
    """One checked call: its seed, the inputs it got, a pristine copy of them, what it returned."""

    seed: int
    inputs: tuple
    pristine: tuple
    out: Any


@dataclass
class RunContext:
    job: Job
    tier: Tier
    emit: Callable[[Event], None]
    kernel: ModuleType | None = None  # the module whose custom_kernel runs (interpreted on CPU)
    compilable: ModuleType | None = None  # what compile builds: ``kernel``, or on the CPU tier a 2nd import (``Dsl.needs_compilable_import``)
    reference: ModuleType | None = None
    reference_modules: dict[str, ModuleType] = field(default_factory=dict)  # it and its snapshot's modules: guarded
    problem: Problem | None = None  # the format adapter every call below goes through
    kernels: dict[str, dict[str, Any]] = field(default_factory=dict)  # DSL name → the module's own kernels
    compiled: list[CompiledFunction] = field(default_factory=list)
    user_files: set[str] = field(default_factory=set)
    seeds: random.Random = field(default_factory=random.Random)
    fresh_seeds: SeedRange = field(default_factory=lambda: fresh_range([]))  # narrowed by pre-checks (``seeds.choice``)
    seeds_used: list[int] = field(default_factory=list)
    guard: Any = None  # integrity.HarnessGuard snapshotted before any user code ran
    answers: list[tuple[tuple, tuple, bool]] = field(default_factory=list)  # (output, reference fingerprints, right) per check
    returned: set[int] = field(default_factory=set)  # storages earlier candidate calls returned (provenance)
    pending_provenance: str | None = None  # the last call's provenance failure, raised by ``pair``
    phases: Phases = field(default_factory=Phases)  # where the current rung's time goes
    rung: str = ""  # the rung in flight, as its events name it
    calibration: Any = None  # the GPU's calibration as the run's first benchmark found or measured it (Obtained)
    parent: Any = None  # the process that started the worker (``ktui.worker.parent.Parent``): it measures a calibration
    peaks: Any = None  # memory.Peaks: the run's and each rung's memory high-water mark
    fresh_plan: Any = None  # the fresh-shapes rung's shapes, or why it has none (``fresh.plan``)
    ahead: Any = None  # the worker's compile-ahead helpers (``ktui.worker.ahead.pool``), if it keeps any
    ahead_sent: dict[str, int] = field(default_factory=dict)  # what this run handed them: shapes, helpers
    sizes: dict[str, Any] | None = None  # memory.Need (or None: unsizable) per shape key; read lazily from the job
    sized: int = 0  # shapes this run sized on fake tensors (the rest came with the job)
    unsized_why: dict[str, str] = field(default_factory=dict)  # shape key → why it could not be sized
    inputs_ahead: Any = None  # the worker's ``ahead.inputs.InputsAhead``: the traced call's inputs, made ahead
    traced: dict | None = None  # the compile rung's traced shape, once its inputs were made

    def __post_init__(self) -> None:
        if self.job.options.seed is not None:
            self.seeds.seed(self.job.options.seed)

    # -- the contract, whatever the problem's format ---------------------------------------------
    @property
    def tests(self) -> list[dict]:
        return self.problem.tests

    @property
    def benchmarks(self) -> list[dict]:
        return self.problem.benchmarks

    @property
    def tolerances(self) -> dict | None:
        return self.problem.tolerances

    def custom_kernel(self, *inputs: Any) -> Any:
        if self.tier.is_gpu:
            return self.problem.custom_kernel(*inputs)

        with contextlib.ExitStack() as scopes:
            for dsl in DSLS:
                scopes.enter_context(dsl.call_scope(is_gpu=False))
            scopes.enter_context(self.problem.scope())
            return self.problem.custom_kernel(*inputs)

    def candidate(self, *inputs: Any, count_launches: bool = True, execute: bool = True,
                  kept: dict[str, Any] | None = None) -> Any:
        """``custom_kernel`` under the integrity checks: the reference may not be called, the
        harness must be left unpatched, the module's own kernels must have launched, and the
        output must come from them (``provenance``). ``execute=False`` turns the module's kernels
        into no-ops that are still counted (the dependence rung). ``kept``: what the harness keeps
        for itself across the call (label → tensors), which must come back byte for byte."""

        self.pending_provenance = None
        sealed = integrity.Sealed(kept or {})
        counted = {dsl: self.kernels[dsl.name] for dsl in self.dsls if dsl.runs_on_cpu or self.tier.is_gpu}
        counter = integrity.LaunchCounter(counted, execute=execute)
        ledger = provenance.StorageLedger()
        with self.reference_kept("custom_kernel"), integrity.reference_tripwire(self.reference), counter.counting():
            try:
                with ledger:
                    out = self.custom_kernel(*inputs)
            except integrity.ReferenceCalled as exc:
                raise RungFailure(str(exc), status="suspicious") from None
        tampered = self.guard.verify() if self.guard is not None else []
        if tampered:
            raise RungFailure(f"custom_kernel patched the harness: {_names(tampered)} (restored)", status="suspicious")
        overwritten = sealed.changed()
        if overwritten:
            raise RungFailure(
                f"custom_kernel changed {'; '.join(overwritten)}, which the harness keeps out of the kernel's reach to "
                "judge its answer: a kernel may write only its own outputs", status="suspicious")
        if count_launches and counter.count == 0:
            raise RungFailure(
                f"custom_kernel returned without launching any of its own {self.dsl_titles} kernels: "
                "the answer came from somewhere else (torch ops, a cache, the reference)",
                status="suspicious",
            )
        if count_launches and execute:
            outputs = [t for t in flatten(out) if type(t) is torch.Tensor]
            self.pending_provenance = provenance.judge(outputs, counter.received, ledger, self.returned)
            self.returned.update(storage_key(t) for t in outputs)
        return out

    @contextlib.contextmanager
    def reference_kept(self, who: str) -> Iterator[None]:
        """Run user code that must leave the reference's modules as they were: a global it replaced,
        added or removed is put back, and the run is suspicious (unless the code raised: then only put back)."""
        watch = integrity.NamespaceGuard(self.reference_modules)
        try:
            yield
        except BaseException:
            watch.verify()
            raise
        patched = watch.verify()
        if patched:
            raise RungFailure(f"{who} patched its reference: {_names(patched)} (restored)", status="suspicious")

    def note_answer(self, out: Any, ref: Any, right: bool) -> str:
        """Remember this call's output, its right answer and whether it was right; say how ``out``
        relates to what earlier calls on other inputs returned.

        ``"cached"``: it is an answer that was right for other inputs (a replayed result).
        ``"repeated"``: it is an answer returned before that was never right, so a wrong kernel whose
        output ignores its input, not a cache. ``""``: neither. Either needs the reference's answer
        to have moved: at some shapes (a softmax of one column) it never does.
        """

        current = (integrity.fingerprint(out), integrity.fingerprint(ref))
        earlier = [(o, was_right) for o, r, was_right in self.answers if o == current[0] and r != current[1]]
        self.answers.append((*current, right))
        if any(was_right for _, was_right in earlier):
            return "cached"
        return "repeated" if earlier else ""

    def poisoned_call(self, shape: dict, seed: int | None = None) -> CheckedCall:
        """The candidate on inputs for ``shape`` from ``seed`` (default: a fresh one), every output
        buffer poisoned beforehand."""

        seed = self.next_seed() if seed is None else seed
        with self.phases.timing("inputs"):
            inputs = self.generate(shape, seed)
            pristine = clone_tree(inputs)
            self.poison_outputs(inputs)
        with self.phases.timing("candidate"), poisoned_allocations():
            out = self.candidate(*inputs, kept={integrity.PRIVATE_INPUTS: pristine})
            synchronize(self.tier)
        return CheckedCall(seed, inputs, pristine, out)

    def pair(self, out: Any, ref: Any) -> list:
        """The candidate's output tensors paired with the reference's (``outputs.pair_outputs``),
        then the last call's provenance: a malformed output is told as such before anything else."""

        pairs = pair_outputs(out, ref, self.tier.torch_device, cast_reference=self.problem.has_check)
        why, self.pending_provenance = self.pending_provenance, None
        if why:
            raise RungFailure(why, status="suspicious")
        return pairs

    def ref_kernel(self, *inputs: Any) -> Any:
        """The reference's answer; its exception is a ``ReferenceFault`` (its cause kept), unless a
        sticky CUDA error the candidate left surfaced in it (the device fails every call then)."""
        with self.phases.timing("reference"), self.problem.scope():
            try:
                return self.problem.ref_kernel(*inputs)
            except Exception as exc:
                if not device_usable(self.tier):
                    raise
                raise ReferenceFault(f"{self.problem.reference_call} raised {type(exc).__name__}: {exc}") from exc

    def next_seed(self) -> int:
        """A fresh seed for every call, so that memoised answers cannot pass: from the range that
        keeps the problem's inputs what its declared seeds make (``ktui.worker.seeds``)."""
        return self.use_seed(self.fresh_seeds.draw(self.seeds))

    def use_seed(self, seed: int) -> int:
        """Record ``seed`` as this run's next one (the run's ``seeds``: how to make its inputs again)."""
        self.seeds_used.append(seed)
        return seed

    def generate(self, shape: dict, seed: int) -> tuple:
        """Inputs for ``shape`` from the reference, as a tuple, on this tier's device."""
        try:
            with self.problem.scope():
                data = self.problem.generate(shape, seed)
        except Exception as exc:
            raise InputGenerationError(f"{self.problem.describe_generate(shape, seed)} raised "
                                       f"{type(exc).__name__}: {exc}") from exc
        return self.placed(data, shape, seed)

    def placed(self, data: Any, shape: dict, seed: int) -> tuple:
        """What the reference made for ``shape`` from ``seed``, checked to hold a tensor and moved to
        this tier's device (made now by ``generate``, or ahead by ``ktui.worker.ahead.inputs``)."""
        returned = tensorless(data)
        if returned:
            raise InputGenerationError(f"{self.problem.describe_generate(shape, seed)} returned {returned}: "
                                       "the inputs must hold at least one tensor")
        return to_device(data, self.tier.torch_device)

    def poison_outputs(self, inputs: tuple) -> int:
        """Poison output buffers passed in ``inputs`` (GPU MODE's ``data``) before a checked call."""
        with self.problem.scope():
            return self.problem.poison_outputs(inputs)

    def learn_output_slots(self, inputs: tuple, pristine: tuple, out: Any) -> str:
        with self.problem.scope():
            return self.problem.learn_output_slots(inputs, pristine, out)

    def watched_inputs(self, inputs: tuple) -> list:
        with self.problem.scope():
            return self.problem.watched_inputs(inputs)

    def check(self, inputs: tuple, output: Any) -> tuple[bool, str]:
        with self.problem.scope():
            return self.problem.check(inputs, output)

    @property
    def dsls(self) -> list[Dsl]:
        """The DSLs the kernel's module has kernels of, in the registry's order."""
        return [dsl for dsl in DSLS if self.kernels.get(dsl.name)]

    @property
    def dsl_titles(self) -> str:
        """"Triton/CuTeDSL" in messages: the DSLs of this module, or every DSL when it has none yet."""
        return "/".join(dsl.title for dsl in (self.dsls or DSLS))


def _names(items: list[str], limit: int = 4) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more
