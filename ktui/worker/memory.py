"""Device memory: what a problem's call holds, whether a checked call fits, and what the run took.

Problems at their real sizes (a KernelBench softmax of 4096×393216 fp32 is 6.4 GB per tensor)
leave little room next to their own tensors, so ktui says up front when one checked call cannot
fit instead of ending in ``CUDA out of memory`` halfway up the ladder, and reports the run's peak
beside the problem's footprint so that ktui's own overhead stays visible:

- ``footprint``: the bytes of one call's inputs, the reference's output and the candidate's.
- ``fit`` / ``require_fit``: before anything heavy, the bytes one checked call needs, found on fake
  tensors (shapes and dtypes, no memory), against what the device has free. A shape is sized once
  per reference version: the figures travel in the pre-checks rung (``sizes``), the history keeps
  them, and the next run's job carries them back (``Job.sizes``). Fake tensors import all of
  ``torch._dynamo`` on first use (1–5 s), which a cold worker then never pays again.
- ``Peaks``: the allocator's high-water mark over a run and each of its rungs, GPU only; on the
  CPU tier there is no such figure and none is made up. Memory allocated outside torch (a
  CuTeDSL workspace, cuBLAS's) is not in it.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from ktui.protocol.cgroups import memory_cgroup
from ktui.worker.errors import RungFailure
from ktui.worker.metrics import workspace_bytes
from ktui.worker.outcome import ReferenceFault, shape_key, shape_label
from ktui.worker.tier import Tier, storage_span, tensors_in

GB = 1e9

# One checked call (correctness.check_once) holds, at most at once: the candidate's inputs and
# their pristine copy (for the mutation check, then the reference's private inputs), and the
# candidate's output and the reference's.
INPUT_COPIES = 2
OUTPUT_COPIES = 2


def nbytes(obj: Any) -> int:
    """Bytes of the tensors in ``obj`` element by element: what a copy of them takes."""
    return sum(t.numel() * t.element_size() for t in tensors_in(obj))


def held_bytes(*objs: Any) -> int:
    """Bytes of the storages behind the tensors in ``objs``, each storage once: what they hold.

    A GPU MODE output is the buffer that came in the inputs, and a view shares its base's
    memory; counting tensors instead of storages would count those twice."""
    storages: dict[int, int] = {}
    for t in tensors_in(list(objs)):
        span = storage_span(t)
        if span is not None:
            storages[span[0]] = max(storages.get(span[0], 0), span[1] - span[0])
    return sum(storages.values())


def footprint(inputs: Any, out: Any, ref: Any) -> int:
    """The problem's own memory for one call: its inputs, the reference's output, the candidate's."""
    return held_bytes(inputs, out, ref)


def note_footprint(ctx: Any, inputs: Any, out: Any, ref: Any) -> None:
    """Record the footprint of the run's largest checked call (what ``summary_figures`` reports): the
    correctness calls', and the first checked call of each benchmark, whose shapes may be far larger."""
    ctx.footprint_bytes = max(getattr(ctx, "footprint_bytes", None) or 0, footprint(inputs, out, ref))


# -- will it fit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """The bytes one checked call on ``shape`` needs."""

    shape: dict  # {} when every shape of the run needs the same
    inputs: int  # one set of inputs
    outputs: int  # one set of outputs (the reference's; the candidate's has the same shapes)
    largest: int  # elements of the largest output tensor
    workspace: int  # the metrics' chunk workspace

    @property
    def total(self) -> int:
        return INPUT_COPIES * self.inputs + OUTPUT_COPIES * self.outputs + self.workspace


@dataclass(frozen=True)
class Fit:
    """The largest checked call of a run against the memory free for it."""

    need: Need | None  # None: the problem's code could not run on fake tensors
    free: int | None  # None: the free memory could not be read
    where: str  # "NVIDIA H200", "the host's RAM"
    sampled: int | None = None  # past SIZED_SHAPES shapes: how many were sized (of ``declared``)
    declared: int = 0
    unsized_why: str = ""  # why a shape could not be sized, where one could not

    @property
    def fits(self) -> bool | None:
        if self.need is None or self.free is None:
            return None
        return self.need.total <= self.free

    @property
    def message(self) -> str:
        if self.need is None:
            return f"not estimated: {self.unsized_why or UNSIZED}"
        need = self.need
        text = (
            f"needs ~{gb_text(need.total)} GB per checked call (inputs {gb_text(need.inputs)} GB ×{INPUT_COPIES}, "
            f"outputs {gb_text(need.outputs)} GB ×{OUTPUT_COPIES}, workspace {gb_text(need.workspace)} GB)"
        )
        if need.shape:
            text += f" at {_label(need.shape)}"
        if self.sampled is not None:
            text += f" (sized on {self.sampled} of its {self.declared} shapes, the extremes included)"
        if self.free is None:
            return f"{text}; free memory on {self.where} unknown"
        return f"{text}, {gb_text(self.free)} GB free on {self.where}"


UNSIZED = "the reference's code does not run on shape-only tensors (it needs real values)"


def estimate(ctx: Any, shape: dict) -> Need | None:
    """What one checked call on ``shape`` needs: from an earlier run against the same reference
    version (``Job.sizes``) or, the first time, from ``size_on_fake_tensors``. None when the
    problem's code cannot be sized."""
    sizes = known_sizes(ctx)
    key = shape_key(shape)
    if key not in sizes:
        sizes[key] = size_on_fake_tensors(ctx, shape)
        ctx.sized += 1
    return sizes[key]


def size_on_fake_tensors(ctx: Any, shape: dict) -> Need | None:
    """The inputs are generated and the reference called under ``FakeTensorMode``: every tensor has
    its real shape, dtype and device and no memory, so a 13 GB problem is sized without taking
    any (milliseconds, once the fake-tensor machinery's first use has imported ``torch._dynamo``).
    The RNG state is restored afterwards (the real calls draw their own seeds). None when the code
    needs real values (``.item()``, NumPy, a kernel launch).
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    devices = list(range(torch.cuda.device_count())) if ctx.tier.is_gpu else []
    try:
        with torch.random.fork_rng(devices=devices), FakeTensorMode(allow_non_fake_inputs=True):
            inputs = ctx.generate(shape, 1)
            ref = ctx.ref_kernel(*inputs)
            largest = max((t.numel() for t in tensors_in(ref)), default=0)
            return need_of(shape, nbytes(inputs), nbytes(ref), largest)
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, ReferenceFault) and exc.__cause__ else exc
        text = str(cause).strip().splitlines()
        ctx.unsized_why[shape_key(shape)] = (f"sizing the reference on shape-only tensors raised {type(cause).__name__}"
                                             + (f": {text[0]}" if text else ""))
        return None


def need_of(shape: dict, inputs: int, outputs: int, largest: int) -> Need:
    return Need(shape, inputs, outputs, largest, workspace_bytes(largest))


def known_sizes(ctx: Any) -> dict[str, Need | None]:
    """The run's sizes by shape, first read from the job's rows (``sizes_rows`` of an earlier run)."""
    if ctx.sizes is None:
        ctx.sizes = {}
        for row in ctx.job.sizes:
            shape = row.get("shape")
            if not isinstance(shape, dict):
                continue
            if row.get("unsized"):
                ctx.sizes[shape_key(shape)] = None
                if isinstance(row.get("why"), str):
                    ctx.unsized_why[shape_key(shape)] = row["why"]
            elif all(isinstance(row.get(k), int) for k in ("inputs", "outputs", "largest")):
                ctx.sizes[shape_key(shape)] = need_of(shape, row["inputs"], row["outputs"], row["largest"])
    return ctx.sizes


def sizes_rows(ctx: Any) -> list[dict]:
    """The pre-checks' ``sizes`` figure: every shape sized so far, as the next run's job carries it."""
    rows = []
    for key, need in known_sizes(ctx).items():
        if need is None:
            why = ctx.unsized_why.get(key)
            rows.append({"shape": json.loads(key), "unsized": True, **({"why": why} if why else {})})
        else:
            rows.append({"shape": need.shape, "inputs": need.inputs, "outputs": need.outputs, "largest": need.largest})
    return rows


def warm_up() -> None:
    """Pay the fake-tensor machinery's one-time setup (``torch._dynamo``'s import) before a
    compile-ahead helper says it is ready."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        torch.softmax(torch.empty(2, 2), dim=1)


def free_bytes(tier: Tier) -> int | None:
    """Memory a run may still take: free device memory on a GPU (plus what this process's caching
    allocator holds unused), available RAM on the CPU tier; None where it cannot be read."""
    if tier.is_gpu:
        free, _total = torch.cuda.mem_get_info()
        return free + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    return available_ram()


def available_ram() -> int | None:
    """``MemAvailable`` of /proc/meminfo (psutil's figure where it is installed), or less where
    this process's memory cgroup leaves less (a container's limit: ``ktui.protocol.cgroups``)."""
    figures = [host_available_ram()]
    cgroup = memory_cgroup()
    if cgroup is not None:
        figures.append(cgroup.headroom())
    known = [figure for figure in figures if figure is not None]
    return min(known) if known else None


def host_available_ram() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def ram_where() -> str:
    """Where the CPU tier's free memory is: the host's RAM, within a cgroup's limit where one is set."""
    cgroup = memory_cgroup()
    limit = cgroup.limit() if cgroup is not None else None
    return "the host's RAM" if limit is None else f"the host's RAM within its cgroup's {gb_text(limit)} GB limit"


def fit(ctx: Any, shapes: list[dict] | None = None, free: int | None = None) -> Fit:
    """The largest checked call among ``shapes`` (default: every test and benchmark shape, or
    past ``SIZED_SHAPES`` of them the ``sizing_sample``) against ``free`` bytes (default: what
    ``free_bytes`` reads now)."""
    declared = 0
    if shapes is None:
        unique = {shape_key(shape): shape for shape in [*ctx.tests, *ctx.benchmarks]}
        declared, shapes = len(unique), sizing_sample(list(unique.values()))
    sampled = len(shapes) if declared > len(shapes) else None
    needs = [estimate(ctx, shape) for shape in shapes]
    known = [n for n in needs if n is not None]
    largest = max(known, key=lambda n: n.total) if known else None
    if largest is not None and len({n.total for n in known}) == 1 and sampled is None:
        largest = replace(largest, shape={})  # every shape needs the same: naming one would mislead
    where = ctx.tier.device if ctx.tier.is_gpu else ram_where()
    why = next((ctx.unsized_why.get(shape_key(shape), "") for shape, need in zip(shapes, needs) if need is None), "")
    return Fit(largest, free if free is not None else free_bytes(ctx.tier), where, sampled, declared, why)


# Past this many distinct shapes, a sample of them is sized: sizing takes tens of milliseconds a
# shape on fake tensors, and 5,000 TESTS sized one by one outlast the pre-checks' limit.
SIZED_SHAPES = 200
_NOT_A_SIZE = {"seed"}  # a GPU MODE shape carries its seed: a number, not a size


def sizing_sample(shapes: list[dict], bound: int = SIZED_SHAPES) -> list[dict]:
    """Every shape up to ``bound``; past it, ``bound`` of them, chosen from the shapes alone (the
    same every run, so the sizes an earlier run recorded are reused): first the extremes (the
    shapes where the product of the numeric parameters is largest and smallest, where each
    numeric parameter is largest and smallest, the largest for each value of every other
    parameter such as a dtype), then shapes spread evenly in order of that product."""
    if len(shapes) <= bound:
        return shapes
    size = [_product(shape) for shape in shapes]
    by_size = sorted(range(len(shapes)), key=lambda i: (size[i], i))
    picked = dict.fromkeys([by_size[-1], by_size[0]])
    for key in sorted({k for shape in shapes for k in shape if k not in _NOT_A_SIZE}):
        magnitude = {i: m for i in by_size if (m := _magnitude(shapes[i].get(key))) is not None}
        if magnitude:
            picked.update(dict.fromkeys([max(magnitude, key=lambda i: (magnitude[i], i)),
                                         min(magnitude, key=lambda i: (magnitude[i], i))]))
        largest_of: dict[str, int] = {}  # each other value (a dtype): its largest shape
        for i in by_size:
            if i not in magnitude:
                largest_of[shape_key({"value": shapes[i].get(key)})] = i  # by_size ascends: the last is the largest
        picked.update(dict.fromkeys(sorted(largest_of.values())))
    room = bound - len(picked)
    for j in range(max(room, 0)):
        picked.setdefault(by_size[round(j * (len(by_size) - 1) / max(room - 1, 1))])
    return [shapes[i] for i in sorted(list(picked)[:bound])]


def _magnitude(value: Any) -> float | None:
    """How large a parameter makes a shape: a number's size, a list of numbers' product."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return abs(float(value))
    if isinstance(value, (list, tuple)) and value:
        parts = [_magnitude(v) for v in value]
        return math.prod(parts) if all(p is not None for p in parts) else None
    return None


def _product(shape: dict) -> float:
    return math.prod(m for k, v in shape.items() if k not in _NOT_A_SIZE and (m := _magnitude(v)) is not None)


def require_fit(ctx: Any, free: int | None = None) -> Fit:
    """``fit``, raising the rung's failure when one checked call cannot fit."""

    result = fit(ctx, free=free)
    if result.fits is False:
        figures = {"need_gb": _gb(result.need.total), "free_gb": _gb(result.free), **sizes_figures(ctx)}
        raise RungFailure(f"does not fit: {result.message}", figures)
    return result


def sizes_figures(ctx: Any) -> dict[str, Any]:
    """What the pre-checks rung records: the sizes, and how many of them this run found itself."""
    return {"sizes": sizes_rows(ctx), "sized": ctx.sized}


# -- what the run took ------------------------------------------------------------------------


class Peaks:
    """The allocator's high-water mark of the run, of each rung and of parts of a rung, from one
    counter.

    torch keeps one peak per device; a part's own peak is read by folding the counter into the
    run's and restarting it. Each rung's figure (``peak_mem_gb``) says where a run's memory went:
    a correctness shape, a benchmark's input sets, its CUDA graph, the metrics of a large output."""

    def __init__(self, tier: Tier):
        self.gpu = tier.is_gpu
        self.run = 0
        self.rung = 0
        if self.gpu:
            torch.cuda.reset_peak_memory_stats()

    def split(self) -> int | None:
        """The peak since the last split (None on the CPU tier), folded into the rung's and the
        run's; the counter starts again from what is allocated now."""
        if not self.gpu:
            return None
        peak = int(torch.cuda.max_memory_allocated())
        self.run, self.rung = max(self.run, peak), max(self.rung, peak)
        torch.cuda.reset_peak_memory_stats()
        return peak

    def start_rung(self) -> None:
        self.split()
        self.rung = 0

    def end_rung(self) -> int | None:
        """The rung's peak: the highest of its parts."""
        return None if self.split() is None else self.rung

    def of_run(self) -> int | None:
        """The run's peak so far; None on the CPU tier."""
        if not self.gpu:
            return None
        return max(self.run, int(torch.cuda.max_memory_allocated()))


def gb_figure(name: str, peak: int | None) -> dict[str, float]:
    """``{name: peak in GB}`` where there is a peak (a GPU), else nothing."""
    return {} if peak is None else {name: _gb(peak)}


def summary_figures(ctx: Any, peak: int | None) -> dict[str, float]:
    """``footprint_gb``, and on a GPU ``peak_mem_gb`` and ``mem_ratio`` (peak / footprint)."""
    figures: dict[str, float] = {}
    footprint_bytes = getattr(ctx, "footprint_bytes", None)
    if footprint_bytes:
        figures["footprint_gb"] = _gb(footprint_bytes)
    if peak is not None:
        figures["peak_mem_gb"] = _gb(peak)
        if footprint_bytes:
            figures["mem_ratio"] = round(peak / footprint_bytes, 3)
    return figures


def _gb(n: int) -> float:
    return float(f"{n / GB:.4g}")


def gb_text(n: float) -> str:
    """Bytes as GB for a message: one decimal from 1 GB up, three significant digits below."""
    value = n / GB
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def _label(shape: dict) -> str:

    return shape_label(shape)
