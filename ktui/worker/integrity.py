"""Checks that keep the verdict honest when the kernel's author optimises against the harness.

A coding agent rewarded for "passed, 3× faster" may find ways to look fast and right without
being either. Each check here turns one such way into the verdict ``suspicious`` with a reason:

- ``HarnessGuard``: the functions ktui measures and compares with (CUDA events and
  synchronisation, timers, its own modules, the torch ops the metrics use) are snapshotted
  before any user code runs and verified — and restored — after the kernel module is imported
  and after every call of ``custom_kernel``, before anything is measured or compared.
- ``LaunchCounter``: counts launches of the module's own kernels, whatever their DSL, during
  one call; a call that launched none computed its answer some other way.
- ``ReferenceTripwire``: the reference module's functions raise an alarm if the candidate calls
  them; ``reference_imports`` finds a kernel file that imports its reference.
- the ``integrity`` rung (``rungs/integrity.py``, on these): new data written into the *same*
  buffers must give the new answer, which a result cached by pointer, shape or call count does not.

What this cannot stop, said plainly in docs/verdicts.md: code running in the same process can defeat
any in-process check (ctypes writes, patching C-level state); strict mode's fresh process per
run limits what survives between versions but is not a sandbox.
"""

from __future__ import annotations

import ast
import contextlib
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import torch

from ktui.worker import memory
from ktui.worker.dsl.base import Dsl
from ktui.worker.errors import RungFailure
from ktui.worker.judgement import judge
from ktui.worker.metrics import flat_chunks
from ktui.worker.provenance import Received
from ktui.worker.tier import clone_tree, tensors_in


def _guarded_targets() -> list[tuple[Any, str, str]]:
    """(owner, attribute, label) of what the timer and the metrics rely on."""
    targets: list[tuple[Any, str, str]] = []

    def add(owner: Any, names: tuple[str, ...], label: str) -> None:
        for name in names:
            if hasattr(owner, name):
                targets.append((owner, name, f"{label}.{name}"))

    add(time, ("perf_counter", "perf_counter_ns", "time", "monotonic"), "time")
    add(torch, ("isfinite", "isnan", "where", "argmax", "equal", "allclose", "zeros_like", "full_like",
                "ones_like", "randn", "randint", "rand", "aminmax"), "torch")
    add(torch.Tensor, ("to", "double", "float", "abs", "max", "min", "sum", "mean", "norm", "reshape", "clone",
                       "detach", "copy_", "fill_", "zero_", "__sub__", "__mul__", "__matmul__", "__eq__", "__add__",
                       "__truediv__", "item", "numel", "data_ptr"), "torch.Tensor")
    cuda = torch.cuda
    add(cuda, ("synchronize", "Event", "current_stream", "Stream", "graph", "CUDAGraph"), "torch.cuda")
    add(cuda.Event, ("record", "elapsed_time", "synchronize", "query", "wait"), "torch.cuda.Event")
    add(cuda.Stream, ("synchronize", "wait_event", "wait_stream", "record_event"), "torch.cuda.Stream")
    return targets


@dataclass
class HarnessGuard:
    """Snapshot of the harness's functions; ``verify`` names what changed and puts it back."""

    entries: list[tuple[Any, str, str, Any]] = field(default_factory=list)

    @classmethod
    def snapshot(cls) -> HarnessGuard:
        guard = cls()
        for owner, name, label in _guarded_targets():
            guard.entries.append((owner, name, label, owner.__dict__.get(name, getattr(owner, name))))
        for module_name, module in sorted(sys.modules.items()):
            if module_name == "ktui" or module_name.startswith("ktui."):
                for attr, value in list(vars(module).items()):
                    if callable(value) and not attr.startswith("__"):
                        guard.entries.append((module, attr, f"{module_name}.{attr}", value))
        return guard

    def verify(self) -> list[str]:
        """Names of patched functions (restored to their originals before returning)."""
        changed = []
        for owner, name, label, original in self.entries:
            current = owner.__dict__.get(name, _MISSING) if isinstance(owner, (type, ModuleType)) else getattr(owner, name)
            if current is _MISSING:
                current = getattr(owner, name, _MISSING)
            if current is not original:
                changed.append(label)
                with contextlib.suppress(AttributeError, TypeError):
                    setattr(owner, name, original)
        return changed


_MISSING = object()


class NamespaceGuard:
    """The globals of the reference's modules as they were; ``verify`` names what user code
    replaced, added or removed since, and puts them back.

    The reference is executed before the kernel's module, so the kernel (at import, or in a call)
    could otherwise swap ``ref_kernel`` or a constant it reads for one that agrees with it."""

    def __init__(self, modules: dict[str, ModuleType]):
        self.saved = {label: (module, dict(vars(module))) for label, module in modules.items()}

    def verify(self) -> list[str]:
        changed = []
        for label, (module, saved) in self.saved.items():
            current = vars(module)
            names = sorted(set(saved) | set(current), key=str)
            diff = [n for n in names if current.get(n, _MISSING) is not saved.get(n, _MISSING)]
            if diff:
                changed.extend(f"{label}.{n}" for n in diff)
                current.clear()
                current.update(saved)
        return changed


class LaunchCounter:
    """Counts launches of a module's kernels, per DSL, during a block, and keeps what they were
    handed (for the provenance check). With ``execute=False`` the launches are recorded but do
    nothing (the dependence rung's no-op kernels)."""

    def __init__(self, kernels: dict[Dsl, dict[str, Any]], execute: bool = True):
        self.kernels = kernels
        self.execute = execute
        self.count = 0
        self.received = Received()

    @contextlib.contextmanager
    def counting(self) -> Iterator[LaunchCounter]:
        counts: list[list[int]] = []
        try:
            with contextlib.ExitStack() as stack:
                for dsl, kernels in self.kernels.items():
                    counts.append(stack.enter_context(dsl.counting(kernels, self.received, self.execute)))
                yield self
        finally:
            self.count = sum(c[0] for c in counts)


class ReferenceCalled(Exception):
    pass


@contextlib.contextmanager
def reference_tripwire(reference: ModuleType) -> Iterator[list[str]]:
    """While active, calling any function of the reference module is recorded (and raised)."""
    calls: list[str] = []
    saved = {}
    for name, value in list(vars(reference).items()):
        if callable(value) and getattr(value, "__module__", None) == reference.__name__:
            saved[name] = value

            def tripped(*args, _name=name, **kwargs):
                calls.append(_name)
                raise ReferenceCalled(f"custom_kernel called the reference's {_name}()")

            setattr(reference, name, tripped)
    try:
        yield calls
    finally:
        for name, value in saved.items():
            setattr(reference, name, value)


def reference_imports(source: str, reference_path: str) -> list[str]:
    """Lines of the kernel's source that import its reference module (a verdict copied, not computed)."""
    stem = Path(reference_path).stem
    hits = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return hits
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
            fname = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            if fname in ("import_module", "spec_from_file_location", "run_path", "load_source"):
                names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        for name in names:
            parts = name.replace("\\", "/").replace("/", ".").split(".")
            if stem in parts or f"{stem}.py" in name:
                hits.append(f"line {node.lineno}: imports {name}")
    return hits


def fingerprint(out: Any, chunk: int | None = None) -> tuple:
    """A cheap identity of an output's values: shape, dtype and two weighted sums, per tensor.

    The sums (plain, and weighted by 1-based flat position) are taken one chunk at a time in
    float64, so a 6 GB output needs no 12 GB float64 copy and no arange of its size.
    """

    prints = []
    for t in tensors_in(out):
        if not t.numel() or t.is_meta:
            prints.append((tuple(t.shape), str(t.dtype)))
            continue
        total = weighted = 0.0
        for offset, piece in flat_chunks(t.detach(), chunk):
            flat = piece.to(torch.float64)
            weights = torch.arange(offset + 1, offset + flat.numel() + 1, device=flat.device, dtype=torch.float64)
            total += float(flat.sum())
            weighted += float(flat @ weights)
        prints.append((tuple(t.shape), str(t.dtype), repr(total), repr(weighted)))
    return tuple(prints)


PRIVATE_INPUTS = "the harness's private copy of input"  # what the reference is judged on: never the kernel's
_SAME_WIDTH_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def checksums(tree: Any, chunk: int | None = None) -> list[tuple[int, int]]:
    """An exact identity of each tensor's bytes, computed where the tensor lies: its elements read
    as integers of their width, summed plain and weighted by position (int64, wrapping). Two small
    reductions per chunk and one transfer of the sums at the end: no host copy of the data."""
    sums = []
    for t in tensors_in(tree):
        if not t.numel() or t.is_meta:
            sums.append(torch.zeros(2, dtype=torch.int64))
            continue
        total = torch.zeros(2, dtype=torch.int64, device=t.device)
        width = t.element_size()
        as_int = _SAME_WIDTH_INTS.get(width, torch.int64)
        for offset, piece in flat_chunks(t.detach(), chunk):
            piece = piece.reshape(-1)
            if piece.stride(0) != 1:  # one element of a strided tensor: a view of it keeps its stride
                piece = piece.clone(memory_format=torch.contiguous_format)
            words = piece.view(as_int).to(torch.int64)
            start = offset * max(1, width // 8)
            weights = torch.arange(start + 1, start + words.numel() + 1, device=words.device, dtype=torch.int64)
            total += torch.stack([words.sum(), (words * weights).sum()])
        sums.append(total)
    if any(t.is_cuda for t in sums):
        torch.cuda.synchronize()  # every stream's work on them is done before they are read
    return [tuple(int(v) for v in total.tolist()) for total in sums]


class Sealed:
    """Tensors the harness keeps for itself (the copy of the inputs the reference is judged on),
    checksummed before user code runs; ``changed`` names any whose bytes moved since.

    A kernel that finds the harness's copies (``gc``, frames) and overwrites them with what suits
    its answer would otherwise be judged against what it wrote."""

    def __init__(self, kept: dict[str, Any]):
        self.kept = kept
        self.sums = {label: checksums(tree) for label, tree in kept.items()}

    def changed(self) -> list[str]:
        """``["the harness's private copy of input 0 and 2"]``: each label whose tensors moved, with their positions."""
        found = []
        for label, tree in self.kept.items():
            moved = [str(i) for i, (a, b) in enumerate(zip(self.sums[label], checksums(tree))) if a != b]
            if moved:
                found.append(f"{label} {' and '.join([', '.join(moved[:-1]), moved[-1]] if len(moved) > 1 else moved)}")
        return found


class TimedOutputCheck:
    """Compares what the kernel returned *while being timed* with the reference's answer.

    A kernel can be right when checked and cut corners when timed (skip work after the first
    calls, return stale buffers). A sample of timed calls — every ``every``-th, and all of them in
    strict mode — is compared, outside the timed region, with the reference's output for that
    input set.
    """

    def __init__(self, ctx, sets: list[tuple], every: int, fresh: Callable[[], tuple] | None = None):

        self.ctx = ctx
        self.sets = sets
        self.every = max(1, every)
        self.expected = [self._expected(i, fresh) for i in range(len(sets))]
        self.checked = 0
        self.failure: str | None = None
        self.failure_figures: dict[str, Any] = {}  # the wrong timed output's error map
        self.sealed = Sealed({"the harness's copy of the reference's answer": self.expected})

    def _expected(self, i: int, fresh: Callable[[], tuple] | None) -> Any:
        """The reference's answer for set ``i``, computed on the set itself when that leaves it as it was.

        A private copy of a set for the reference is a whole footprint more at the benchmark's peak
        (47_Sum held 3.00× on the H200), so it is made only where the reference writes into its
        inputs: GPU MODE's output buffers, or a reference seen to move a set's bytes, whose set is
        then replaced by ``fresh()`` (without ``fresh``, every set is copied).
        """
        if fresh is None or self.ctx.problem.has_check:
            return self.ctx.ref_kernel(*clone_tree(self.sets[i]))
        before = checksums(self.sets[i])
        answer = self.ctx.ref_kernel(*self.sets[i])
        if checksums(self.sets[i]) == before:
            return answer
        del answer
        self.sets[i] = fresh()
        return self.ctx.ref_kernel(*clone_tree(self.sets[i]))

    def overwritten(self) -> str | None:
        """Why the timed answers cannot be trusted: the reference's answers they are compared with moved."""
        changed = self.sealed.changed()
        return f"custom_kernel changed {', '.join(changed[:4])} while timed" if changed else None

    def inspect(self, index: int, round_: int, result: Any) -> None:
        if index != 0 or self.failure is not None or round_ % self.every:
            return

        self.checked += 1
        which = round_ % len(self.sets)
        if self.checked == 1:  # a benchmark shape is often the run's largest call: the memory ratio's denominator
            memory.note_footprint(self.ctx, self.sets[which], result, self.expected[which])
        try:
            pairs = self.ctx.pair(result, self.expected[which])
        except RungFailure as exc:
            self.failure = f"timed call {round_}: {exc.message}"
            return
        # Only a problem's own check reads the inputs (and may write into them): a private copy of
        # a set is a whole footprint more at the benchmark's peak, so it is made only for it.
        pristine = clone_tree(self.sets[which]) if self.ctx.problem.has_check else ()
        verdict = judge(self.ctx, pristine, result, pairs)
        if not verdict.passed:
            self.failure = f"timed call {round_}: {verdict.reason}"
            self.failure_figures = verdict.map_figures()


def timer_escape(call, sets: list[tuple], event_us: float, host_us: float, calls: int = 20,
                 rounds: int = 5) -> dict[str, Any]:
    """Wall-clock time per call with the whole device synchronised, next to the event time.

    Events on the current stream see only work on that stream. Work launched on another stream
    or thread, or deferred, is invisible to them but not to ``torch.cuda.synchronize()``. Back to
    back, a call costs at most about max(its device time, its launch time); much more than that
    means the timer missed work. A round of ``calls`` calls is repeated up to ``rounds`` times and
    the fastest counts: hidden work costs its time in every round, while another process's turn on
    the GPU (or the host descheduling this one) slows only some — one round within the bound ends it.
    """
    expected_us = max(event_us, host_us)
    bound_us = 2.0 * expected_us + 20.0
    wall_us = math.inf
    for _ in range(rounds):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for i in range(calls):
            call(sets[i % len(sets)])
        torch.cuda.synchronize()
        wall_us = min(wall_us, (time.perf_counter() - started) / calls * 1e6)
        if wall_us <= bound_us:
            break
    return {"wall_us": wall_us, "escaped": wall_us > bound_us}
