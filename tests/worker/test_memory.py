"""Device memory: the fit check before anything heavy, the footprint, and the run's peak figures."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import finished, ktui, parse_events

from ktui.protocol.job import Job, Options
from ktui.protocol.lines import memory_text, summary_line
from ktui.worker import memory
from ktui.worker.context import RunContext
from ktui.worker.errors import RungFailure
from ktui.worker.metrics import compare, workspace_bytes
from ktui.worker.modules import job_imports
from ktui.worker.rungs import precheck
from ktui.worker.tier import detect

# KernelBench level 1's softmax at its real size: 6.4 GB per fp32 tensor.
SOFTMAX_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size, dim = {rows}, {cols}


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
"""

SOFTMAX_CANDIDATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offsets, mask=offsets < cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + offsets, e / tl.sum(e, axis=0), mask=offsets < cols)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_rows[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
"""


def kernelbench_pair(tmp_path: Path, rows: int, cols: int) -> tuple[Path, Path]:
    problem = tmp_path / "softmax_problem.py"
    problem.write_text(textwrap.dedent(SOFTMAX_PROBLEM.format(rows=rows, cols=cols)))
    candidate = tmp_path / "softmax_candidate.py"
    candidate.write_text(textwrap.dedent(SOFTMAX_CANDIDATE))
    return problem, candidate


def loaded_context(tmp_path: Path, rows: int, cols: int) -> RunContext:
    """A run's context after its pre-checks, on the CPU tier: the problem is loaded, nothing ran."""
    problem, candidate = kernelbench_pair(tmp_path, rows, cols)
    job = Job("r", "softmax_candidate", str(candidate), str(problem), "", "", str(tmp_path), 1, "h",
              candidate.read_text(), str(tmp_path / "run"), Options(force_cpu=True), format="kernelbench")
    ctx = RunContext(job=job, tier=detect(force_cpu=True), emit=lambda event: None)
    with job_imports(job):
        try:
            precheck.run(ctx)
        except RungFailure as exc:  # pre-checks sizes the problem last: a machine too small refuses it there
            assert exc.message.startswith("does not fit: "), exc.message
    return ctx


@pytest.mark.unit
def test_a_problem_too_big_for_the_free_memory_is_refused_up_front_with_its_sizes(tmp_path):
    ctx = loaded_context(tmp_path, 4096, 393216)
    rng = torch.get_rng_state()
    seeds_before = list(ctx.seeds_used)
    fit = memory.fit(ctx, free=8 * 10**9)
    tensor = 4096 * 393216 * 4  # one fp32 tensor: 6.4 GB, sized on fake tensors without allocating it
    assert fit.need.inputs == tensor and fit.need.outputs == tensor
    assert fit.need.total == 2 * tensor + 2 * tensor + workspace_bytes()
    assert fit.fits is False
    assert fit.message == (
        f"needs ~{memory.gb_text(fit.need.total)} GB per checked call (inputs 6.4 GB ×2, outputs 6.4 GB ×2, "
        f"workspace {memory.gb_text(workspace_bytes())} GB), 8.0 GB free on the host's RAM"
    )
    with pytest.raises(RungFailure, match=r"does not fit: needs ~2\d\.\d GB per checked call"):
        memory.require_fit(ctx, free=8 * 10**9)
    # Sizing it drew no seed and left the global generator where it was.
    assert ctx.seeds_used == seeds_before and torch.equal(torch.get_rng_state(), rng)


@pytest.mark.unit
def test_a_shape_is_sized_once_and_the_next_job_brings_its_sizes(tmp_path, monkeypatch):
    first = loaded_context(tmp_path, 8, 100)
    rows = memory.sizes_figures(first)["sizes"]
    shapes = [shape for i, shape in enumerate(first.tests + first.benchmarks) if shape not in (first.tests + first.benchmarks)[:i]]
    assert first.sized == len(rows) == len(shapes) and [row["shape"] for row in rows] == shapes
    assert all(row["inputs"] == row["outputs"] == 8 * 100 * 4 for row in rows)

    def never(ctx, shape):
        raise AssertionError(f"sized {shape} again")

    later = RunContext(job=dataclasses.replace(first.job, sizes=rows), tier=first.tier, emit=lambda event: None)
    later.problem = first.problem
    monkeypatch.setattr(memory, "size_on_fake_tensors", never)
    assert memory.estimate(later, later.benchmarks[0]) == memory.estimate(first, first.benchmarks[0])
    assert later.sized == 0 and memory.sizes_rows(later) == rows


@pytest.mark.unit
def test_a_shape_that_could_not_be_sized_is_not_tried_again(tmp_path, monkeypatch):
    first = loaded_context(tmp_path, 8, 100)
    shape = first.benchmarks[0]
    later = RunContext(job=dataclasses.replace(first.job, sizes=[{"shape": shape, "unsized": True}]),
                       tier=first.tier, emit=lambda event: None)
    monkeypatch.setattr(memory, "size_on_fake_tensors", lambda ctx, shape: pytest.fail("sized again"))
    assert memory.estimate(later, shape) is None and later.sized == 0
    assert memory.sizes_rows(later) == [{"shape": shape, "unsized": True}]


COLD_WORKER_NEVER_IMPORTS_DYNAMO = """
import sys
import torch
from ktui.protocol.job import Job, Options
from ktui.worker import memory, provenance
from ktui.worker.context import RunContext
from ktui.worker.tier import detect

job = Job("r", "k", "k.py", "r.py", "", "", ".", 1, "h", "", "run", Options(force_cpu=True),
          sizes=[{"shape": {"n": 4}, "inputs": 16, "outputs": 16, "largest": 4}])
ctx = RunContext(job=job, tier=detect(force_cpu=True), emit=lambda event: None)
assert memory.estimate(ctx, {"n": 4}).inputs == 16
with provenance.StorageLedger() as ledger:
    out = torch.empty(4)
    out.copy_(torch.ones(4) + 1)
assert ledger.origins, "the ledger recorded nothing"
print("dynamo" if "torch._dynamo" in sys.modules else "no dynamo")
import torch._dynamo
with provenance.StorageLedger() as ledger:
    torch.ones(4) + 1
assert ledger.origins and provenance._record_outside_dynamo.cache_info().currsize == 1
print("kept out of dynamo")
"""


@pytest.mark.worker
def test_a_worker_with_its_sizes_never_imports_torch_dynamo_and_keeps_dynamo_out_once_loaded():
    """torch's fake tensors and a ``TorchDispatchMode``'s own ``__torch_dispatch__`` import all of
    ``torch._dynamo`` on first use (1–5 s of a cold worker); with the sizes known and the ledger's
    dispatch set after its class was made, a run needs neither."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", COLD_WORKER_NEVER_IMPORTS_DYNAMO], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["no", "dynamo", "kept", "out", "of", "dynamo"]


@pytest.mark.unit
def test_a_problem_that_fits_passes_the_check(tmp_path):
    ctx = loaded_context(tmp_path, 8, 100)
    fit = memory.require_fit(ctx, free=10**9)
    assert fit.fits is True and fit.need.inputs == 8 * 100 * 4


@pytest.mark.unit
def test_a_benchmark_at_kernelbench_size_rotates_only_the_input_sets_that_keep_it_within_3x(tmp_path):
    """KernelBench's ReLU/softmax at 6.4 GB a tensor: three rotating sets (each with its expected
    output) plus one call's worth of the problem held 3.4× the footprint on the H200; two keep it
    within ``MEMORY_RATIO``. Sized on fake tensors, as the benchmark sizes them."""
    from ktui.worker.rungs import bench

    ctx = loaded_context(tmp_path, 4096, 393216)
    need = memory.estimate(ctx, ctx.benchmarks[0])
    sets = bench.sets_within_ratio(need, wanted=3)
    footprint = need.inputs + 2 * need.outputs
    held = sets * (need.inputs + need.outputs) + footprint + need.workspace
    assert sets == 2 and held <= bench.MEMORY_RATIO * footprint
    assert 3 * (need.inputs + need.outputs) + footprint + need.workspace > bench.MEMORY_RATIO * footprint


@pytest.mark.unit
def test_a_small_benchmark_keeps_every_input_set_it_asks_for(tmp_path):
    from ktui.worker.rungs import bench

    ctx = loaded_context(tmp_path, 64, 1024)
    assert bench.sets_within_ratio(memory.estimate(ctx, ctx.benchmarks[0]), wanted=3) == 3
    assert bench.sets_within_ratio(None, wanted=3) == 3


@pytest.mark.unit
def test_a_benchmark_past_a_gigabyte_still_rotates_two_input_sets(tmp_path):
    """A 16384×8192 fp32 softmax (1.6 GB of problem beside a 1.6 GB metrics workspace): the ratio
    alone would leave one set, and one set cannot tell a result cached by pointer from a computed one."""
    from ktui.worker.rungs import bench

    ctx = loaded_context(tmp_path, 16384, 8192)
    need = memory.estimate(ctx, ctx.benchmarks[0])
    assert need.inputs + 2 * need.outputs >= bench.SMALL_FOOTPRINT
    assert bench.sets_within_ratio(need, wanted=3) == 2 and bench.sets_within_ratio(need, wanted=1) == 1


@pytest.mark.unit
def test_a_benchmark_under_a_gigabyte_rotates_fewer_sets_when_three_and_the_flush_buffer_pass_3x(tmp_path):
    """KernelBench's 4096² fp32 matmul (0.27 GB of problem) kept three sets below the old 1 GB floor
    of the rule and held 6.16× on the H200. A problem of that size is held to the ratio now, with
    the L2 flush buffer (120 MiB on an H200) counted among what the benchmark holds."""
    from ktui.worker.rungs import bench

    ctx = loaded_context(tmp_path, 4096, 5504)  # 0.27 GB: its input and two outputs
    need = memory.estimate(ctx, ctx.benchmarks[0])
    footprint = need.inputs + 2 * need.outputs
    assert bench.SMALL_FOOTPRINT < footprint < 10**9
    flush = 120 * 2**20
    assert 3 * (need.inputs + need.outputs) + footprint + need.workspace + flush > bench.MEMORY_RATIO * footprint
    assert bench.sets_within_ratio(need, wanted=3, fixed=flush) == 2


@pytest.mark.unit
def test_free_memory_on_the_cpu_tier_is_the_hosts_available_ram():
    free = memory.free_bytes(detect(force_cpu=True))
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert free is not None and 0 < free <= total


@pytest.mark.unit
def test_the_footprint_counts_each_storage_once():
    x = torch.zeros(10, 4)
    out = torch.zeros(10, 4)
    assert memory.footprint((x,), out, out.clone()) == 3 * 160
    assert memory.footprint((x, out), out, x[0]) == 2 * 160  # an output that came in the inputs, a view


@pytest.mark.unit
def test_summary_figures_have_no_peak_on_the_cpu_tier_and_a_ratio_with_one():
    class Noted:
        pass

    ctx = Noted()
    memory.note_footprint(ctx, (torch.zeros(1000),), torch.zeros(1000), torch.zeros(1000))
    memory.note_footprint(ctx, (torch.zeros(1),), torch.zeros(1), torch.zeros(1))  # only the first call counts
    assert memory.Peaks(detect(force_cpu=True)).of_run() is None
    assert memory.summary_figures(ctx, None) == {"footprint_gb": 1.2e-05}
    assert memory.summary_figures(ctx, 36_000) == {"footprint_gb": 1.2e-05, "peak_mem_gb": 3.6e-05, "mem_ratio": 3.0}


@pytest.mark.unit
def test_the_summary_line_says_the_peak_next_to_the_footprint_only_when_measured():
    gpu = {"correct": [5, 5], "footprint_gb": 19.33, "peak_mem_gb": 33.5, "mem_ratio": 1.733}
    assert memory_text(gpu) == "peak 33.5 GB (1.7× the problem's 19.3 GB)"
    assert "peak 33.5 GB (1.7× the problem's 19.3 GB)" in summary_line("k", 1, "passed", gpu, "gpu", "sm_90a", 1.0)
    assert memory_text({"footprint_gb": 19.33}) == ""


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kb_memory")
    problem, candidate = kernelbench_pair(tmp, 16, 1000)
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--cpu", "--seed", "3", str(candidate), "--reference", str(problem), cwd=tmp)
    return proc, parse_events(proc.stdout)


@pytest.mark.worker
def test_the_run_summary_carries_the_footprint_on_the_cpu_tier_and_no_peak(cpu_run):
    proc, events = cpu_run
    summary = finished(events)["summary"]
    assert finished(events)["verdict"] == "passed", proc.stdout[-2000:]
    assert summary["footprint_gb"] == pytest.approx(3 * 16 * 1000 * 4 / 1e9, rel=1e-3)
    assert "peak_mem_gb" not in summary and "mem_ratio" not in summary


@pytest.mark.worker
@pytest.mark.gpu
def test_on_a_gpu_the_run_reports_its_peak_and_ratio(tmp_path):
    # 1.07 GB per tensor: large enough that the run's fixed costs (the CUDA context, the metrics'
    # chunk workspace) do not dominate, which is where the ≤ 3× target applies
    problem, candidate = kernelbench_pair(tmp_path, 65536, 4096)
    proc = ktui("run", "--no-audit", "--json", "--no-bench", str(candidate), "--reference", str(problem), cwd=tmp_path)
    end = finished(parse_events(proc.stdout))
    summary = end["summary"]
    assert end["verdict"] == "passed", json.dumps(summary)
    assert summary["footprint_gb"] == pytest.approx(3 * 65536 * 4096 * 4 / 1e9, rel=1e-3)  # 4 digits kept
    assert summary["peak_mem_gb"] >= summary["footprint_gb"]
    assert summary["mem_ratio"] == pytest.approx(summary["peak_mem_gb"] / summary["footprint_gb"], rel=1e-2)
    assert summary["mem_ratio"] <= 3.0


@pytest.mark.worker
@pytest.mark.gpu
def test_on_a_gpu_compare_takes_at_most_its_chunk_workspace():
    chunk = 1 << 20
    ref = torch.randn(64 << 20, device="cuda")  # 64 chunks
    out = ref + 1e-7
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    compare(out, ref, chunk=chunk)
    compare(out.view(8192, -1).t(), ref.view(8192, -1).t(), chunk=chunk)  # non-contiguous: chunks are copied
    assert torch.cuda.max_memory_allocated() - before <= workspace_bytes(chunk=chunk)


@pytest.mark.unit
def test_a_benchmark_shape_larger_than_every_test_shape_sets_the_footprint_the_memory_ratio_divides_by(monkeypatch):
    """GPU MODE benchmarks run shapes far larger than its tests: a ratio over the tests' footprint
    read 3972× on the H200 for a correct grayscale kernel."""
    from types import SimpleNamespace

    from ktui.worker import integrity

    monkeypatch.setattr(integrity, "judge", lambda ctx, inputs, out, pairs: SimpleNamespace(passed=True))
    ctx = SimpleNamespace(ref_kernel=lambda x: x * 2, pair=lambda out, ref: [(out, ref)], footprint_bytes=4 * 3 * 8,
                          problem=SimpleNamespace(has_check=False))
    large = [(torch.ones(1000),), (torch.ones(1000),)]
    check = integrity.TimedOutputCheck(ctx, large, every=1)
    check.inspect(0, 0, large[0][0] * 2)  # the first timed call of the benchmark, checked
    assert ctx.footprint_bytes == 3 * 1000 * 4  # its input, its output, the reference's
    check.inspect(0, 1, large[1][0] * 2)
    assert ctx.footprint_bytes == 3 * 1000 * 4


@pytest.mark.unit
def test_the_metrics_workspace_of_a_mid_sized_output_is_a_fraction_of_its_footprint_not_a_fixed_gigabyte():
    """KernelBench's 4096² fp32 matmul (a 64 MiB output, 0.27 GB of problem) held 6.16× on the H200:
    a 16 Mi-element chunk of metrics workspace is 1.6 GB whatever the output's size."""
    numel = 4096 * 4096
    footprint = 4 * numel * 4  # two inputs, the reference's output, the candidate's
    assert workspace_bytes(numel) <= 0.4 * footprint
    assert workspace_bytes(10 * 2**30) == workspace_bytes()  # a huge output keeps the largest chunk
    assert workspace_bytes(1000) < 2**20 + 1000 * 100  # a small one: its own size


@pytest.mark.unit
def test_a_timed_check_copies_the_inputs_only_for_a_problem_that_brings_its_own_judge(monkeypatch):
    """A private copy of a benchmark's inputs is a whole footprint at its peak (47_Sum read 3.02×
    on the H200); only GPU MODE's check_implementation reads them."""
    from types import SimpleNamespace

    from ktui.worker import integrity

    copies = []
    real_clone = integrity.clone_tree
    monkeypatch.setattr(integrity, "clone_tree", lambda tree: copies.append(tree) or real_clone(tree))
    monkeypatch.setattr(integrity, "judge", lambda ctx, inputs, out, pairs: SimpleNamespace(passed=True))
    for has_check, copied in ((False, 0), (True, 1)):
        ctx = SimpleNamespace(ref_kernel=lambda x: x * 2, pair=lambda out, ref: [(out, ref)],
                              problem=SimpleNamespace(has_check=has_check))
        sets = [(torch.ones(10),)]
        check = integrity.TimedOutputCheck(ctx, sets, every=1)
        copies.clear()
        check.inspect(0, 0, sets[0][0] * 2)
        assert len(copies) == copied


@pytest.mark.worker
@pytest.mark.gpu
def test_on_a_gpu_each_part_has_its_own_peak_and_the_run_keeps_the_highest():
    peaks = memory.Peaks(detect())
    peaks.start_rung()
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    del big
    first = peaks.split()
    small = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")
    del small
    second = peaks.split()
    base = torch.cuda.memory_allocated()
    assert first - base >= 256 << 20 and second - base < 256 << 20
    assert peaks.end_rung() == first and peaks.of_run() == first
    peaks.start_rung()
    assert peaks.end_rung() < first and peaks.of_run() == first


@pytest.mark.unit
def test_the_input_mutation_check_compares_a_chunk_at_a_time():
    """47_Sum's 8.6 GB input held 3.00× on the H200 at correctness: comparing it whole made four
    boolean masks of its size at once (a third copy of the input)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from ktui.worker.metrics import chunk_elements
    from ktui.worker.tier import same_values

    class LargestResult(TorchDispatchMode):
        largest = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            for t in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(t, torch.Tensor):
                    self.largest = max(self.largest, t.numel())
            return result

    x = torch.zeros(64, 1 << 20)
    y = x.clone()
    with LargestResult() as seen:
        assert same_values(x, y)
    assert seen.largest <= chunk_elements(x.numel())
    y[-1, -1] = 1.0
    assert not same_values(x, y)


@pytest.mark.unit
def test_a_benchmark_computes_its_expected_answers_on_the_sets_themselves_without_a_copy(monkeypatch):
    """A copy of each set for the reference made 47_Sum's benchmark hold three inputs (3.00× on the H200)."""
    from types import SimpleNamespace

    from ktui.worker import integrity

    copies = []
    real_clone = integrity.clone_tree
    monkeypatch.setattr(integrity, "clone_tree", lambda tree: copies.append(tree) or real_clone(tree))
    ctx = SimpleNamespace(ref_kernel=lambda x: x * 2, problem=SimpleNamespace(has_check=False))
    sets = [(torch.arange(4.0),), (torch.arange(4.0) + 10,)]
    check = integrity.TimedOutputCheck(ctx, sets, every=1, fresh=lambda: pytest.fail("no set was written"))
    assert not copies
    assert [e.tolist() for e in check.expected] == [[0, 2, 4, 6], [20, 22, 24, 26]]


@pytest.mark.unit
def test_a_set_the_reference_writes_into_is_replaced_by_a_fresh_one_judged_on_a_copy():
    from types import SimpleNamespace

    from ktui.worker import integrity

    def in_place_reference(x):
        return x.mul_(2)

    ctx = SimpleNamespace(ref_kernel=in_place_reference, problem=SimpleNamespace(has_check=False))
    sets = [(torch.arange(4.0),)]
    check = integrity.TimedOutputCheck(ctx, sets, every=1, fresh=lambda: (torch.full((4,), 5.0),))
    assert sets[0][0].tolist() == [5, 5, 5, 5]  # the fresh set, untouched: the candidate is timed on it
    assert check.expected[0].tolist() == [10, 10, 10, 10]
    assert check.overwritten() is None


@pytest.mark.unit
def test_past_the_bound_a_sample_of_the_shapes_is_sized_the_same_every_time_with_the_extremes():
    few = [{"size": n} for n in range(memory.SIZED_SHAPES)]
    assert memory.sizing_sample(few) == few
    shapes = [{"m": m, "n": n, "dtype": dtype} for m in range(1, 41) for n in (7, 1, 3000, 64)
              for dtype in ("float16", "float64")]
    shapes.append({"m": 2, "n": 2, "dtype": "int8"})  # the one shape of its dtype
    sample = memory.sizing_sample(shapes)
    assert len(shapes) > memory.SIZED_SHAPES >= len(sample) > memory.SIZED_SHAPES * 0.9
    assert sample == memory.sizing_sample(list(shapes)) and all(s in shapes for s in sample)
    assert [s for s in shapes if s in sample] == sample  # in the declared order
    for extreme in ({"m": 40, "n": 3000, "dtype": "float64"}, {"m": 1, "n": 1, "dtype": "float16"},
                    {"m": 2, "n": 2, "dtype": "int8"}):
        assert extreme in sample, extreme
    assert {s["m"] for s in sample} >= {1, 40} and {s["n"] for s in sample} >= {1, 7, 64, 3000}


@pytest.mark.worker
def test_a_reference_with_5000_tests_passes_the_pre_checks_within_their_limit_sized_on_a_sample(tmp_path):
    from conftest import REPO, make_workspace

    ws = make_workspace(tmp_path / "ws")
    reference = (REPO / "references" / "add.py").read_text()
    (ws / "references" / "many.py").write_text(reference.replace("TESTS = [", "TESTS = [*({'size': n} for n in range(1, 5001)),", 1))
    (ws / "kernels" / "many_unwritten.py").write_text(
        "import triton\n\n\n@triton.jit\ndef k(x_ptr):\n    pass\n\n\n"
        "def custom_kernel(x, y):\n    raise NotImplementedError('the pre-checks are what this run is about')\n")
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--cpu", "--seed", "1", "kernels/many_unwritten.py", cwd=ws)
    rungs = {e["rung"]: e for e in parse_events(proc.stdout) if e["type"] == "rung_finished"}
    checks = rungs["pre-checks"]
    assert checks["status"] == "ok", proc.stdout[-3000:] + proc.stderr[-3000:]  # not timed out: within its limit
    declared = len({*range(1, 5001), 1, 1000, 12345, 98432, 1 << 20, 1 << 16, 1 << 22, 1 << 26})  # distinct shapes
    assert checks["figures"]["tests"] == 5005
    assert 0 < checks["figures"]["sized"] == len(checks["figures"]["sizes"]) <= memory.SIZED_SHAPES
    assert f"(sized on {checks['figures']['sized']} of its {declared} shapes, the extremes included)" in checks["message"]
    assert {"size": 1 << 26} in [row["shape"] for row in checks["figures"]["sizes"]]  # the largest
    assert rungs["compile"]["status"] == "failed"


@pytest.mark.worker
def test_on_the_cpu_tier_a_cgroup_limit_below_the_problems_need_refuses_it_up_front_naming_the_limit(tmp_path):
    import subprocess
    import sys

    from cgroups import limited
    from conftest import child_env, make_workspace

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    with limited(1_200_000_000) as (_cgroup, inside):  # the add problem's largest checked call needs ~1.8 GB
        proc = subprocess.run([*inside, sys.executable, "-m", "ktui", "run", "--no-audit", "--json", "--no-bench", "--cpu",
                               "--seed", "1", "kernels/add_triton.py"], cwd=ws, capture_output=True, text=True,
                              env=child_env(), timeout=600)
    checks = next(e for e in parse_events(proc.stdout) if e["type"] == "rung_finished" and e["rung"] == "pre-checks")
    assert checks["status"] == "failed", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert checks["message"].startswith("does not fit: needs ~1.8 GB per checked call")
    assert checks["message"].endswith("GB free on the host's RAM within its cgroup's 1.2 GB limit")
    assert checks["figures"]["free_gb"] < 1.2
