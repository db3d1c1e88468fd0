"""The shipped CuTeDSL row kernels (softmax, RMSNorm) compile on a machine without a GPU for
every specialisation their references' shapes need, and reuse compiled code within a width bucket.

Needs nvidia-cutlass-dsl (4.8.1) and torch; no GPU: kernels are compiled for sm_90a and never
launched, so what is checked is the generated code (128-bit accesses, registers, reductions);
their values are checked by ktui's GPU tier.
"""

import importlib.util
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ktui.worker.dsl import cutedsl as kc  # noqa: E402  (imports no cutlass)

pytestmark = pytest.mark.unit

kc.configure_env("sm_90a")  # before cutlass is imported: CuTeDSL reads it once
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")
torch = pytest.importorskip("torch")

PROBLEMS = ["softmax", "rmsnorm"]


def load(path):
    """Import a file as a fresh module (a kernel's compile cache starts empty)."""
    spec = importlib.util.spec_from_file_location(f"user_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel(problem):
    return load(ROOT / "kernels" / f"{problem}_cutedsl.py")


def reference(problem):
    return load(ROOT / "references" / f"{problem}.py")


def compile_each(module, calls):
    """The record of the kernel each call launches; every launch is skipped (no GPU)."""
    records = []
    with kc.CuteCapture(execute=False):
        for inputs in calls:
            with pytest.raises(kc.ExecutionSkipped) as skipped:
                module.custom_kernel(*inputs)
            records.append(skipped.value.record)
    return records


def vector_elems(dtype: str) -> int:
    return 16 // torch.empty(0, dtype=getattr(torch, dtype)).element_size()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_every_test_shape_compiles_for_sm90a_with_the_row_in_registers(problem):
    module, ref = kernel(problem), reference(problem)
    shapes = ref.TESTS
    records = compile_each(module, [ref.generate_input(0, **shape) for shape in shapes])

    for shape, rec in zip(shapes, records, strict=True):
        ptx, cols = rec["artifacts"]["ptx"], shape["cols"]
        assert ".target sm_90a" in ptx and rec["artifacts"]["cubin"][:4] == b"\x7fELF", shape
        assert ".local" not in ptx, shape  # no per-thread array left in local memory
        vec = vector_elems(shape.get("dtype", "float32"))
        vec = vec if cols % vec == 0 else 1  # odd widths: one element per access
        assert ("ld.global.v4" in ptx and "st.global.v4" in ptx) == (vec > 1), shape
        layout = module.specialisation(cols, vec)
        assert rec["source_fn"] == f"{problem}_{'long_rows' if layout == 'long' else 'rows'}", shape
        threads_per_row = module.LONG_THREADS if layout == "long" else layout[1]
        assert ("bar.sync" in ptx) == (threads_per_row > 32), shape  # shared memory only across warps
    assert len(module._compiled) == len({r["name"] for r in records})  # one compile per specialisation


@pytest.mark.parametrize("problem", PROBLEMS)
def test_compiled_code_serves_every_width_of_a_bucket_and_benchmark_shapes_compile_once(problem):
    module, ref = kernel(problem), reference(problem)

    def inputs(rows, cols, dtype="float32", offset=0):
        x = torch.randn(rows, cols + offset).to(getattr(torch, dtype))[:, offset:]
        return (x,) if problem == "softmax" else (x, torch.rand(cols).to(x.dtype))

    benchmarks = [inputs(3, b["cols"], b.get("dtype", "float32")) for b in ref.BENCHMARKS]
    compile_each(module, benchmarks)
    compiled = dict(module._compiled)
    assert len(compiled) == len({(b.get("dtype"), b["cols"]) for b in ref.BENCHMARKS})

    compile_each(module, [*benchmarks, inputs(5, 4000), inputs(1, 3076)])  # 4000, 3076 share 4096's bucket
    assert module._compiled == compiled

    (scalar,) = compile_each(module, [inputs(2, 4096, offset=1)])  # rows start off 16 bytes
    assert len(module._compiled) == len(compiled) + 1
    assert "ld.global.v4" not in scalar["artifacts"]["ptx"]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_each_width_bucket_is_covered_by_its_threads_without_more_than_32_values_a_thread(problem):
    module = kernel(problem)
    for vec in (1, 4, 8):
        for block in (1 << p for p in range(15)):
            if block > module.MAX_FUSED:
                continue
            rows, threads, ilp = module.fused_layout(block, vec)
            assert threads * vec * ilp >= block and 32 <= threads <= 1024 and threads % 32 == 0
            assert rows * threads >= 128 and rows * threads <= 1024
            assert ilp * vec <= 32 and ilp <= module.ILP * 4


def test_bad_input_gets_a_clear_message():
    softmax, rmsnorm = kernel("softmax"), kernel("rmsnorm")
    with pytest.raises(ValueError, match=r"x must be \(rows, cols\): got \(2, 3, 4\)"):
        softmax.custom_kernel(torch.randn(2, 3, 4))
    with pytest.raises(TypeError, match=r"unsupported dtype torch\.int32"):
        softmax.custom_kernel(torch.ones(2, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"weight \(cols,\) of x's dtype"):
        rmsnorm.custom_kernel(torch.randn(2, 3), torch.randn(4))
    with pytest.raises(ValueError, match=r"weight \(cols,\) of x's dtype"):
        rmsnorm.custom_kernel(torch.randn(2, 3), torch.randn(3, dtype=torch.float64))
