"""The shipped CuTeDSL softmax and RMSNorm on a GPU, on what their references' shapes leave out:
every width bucket's edges, long softmax rows (the chunked variant), row views that start off
16 bytes or skip memory between rows, a row count that is not a multiple of rows per CTA, fp16.

Run on a CUDA machine with ``python -m pytest -m gpu tests/worker/test_cutedsl_rows_gpu.py``.
"""

import importlib.util
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.worker]
torch = pytest.importorskip("torch")
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")

ROOT = Path(__file__).resolve().parents[2]
# ktui's float32 limits (atol, rtol); 16-bit outputs: within a rounding or two of the reference
TOLERANCE = {"float32": (1e-5, 1e-4), "bfloat16": (1e-6, 1.6e-2), "float16": (1e-6, 2e-3)}
WIDTHS = [1, 2, 31, 32, 33, 255, 256, 257, 1000, 1024, 1025, 3001, 4096, 8191, 8192, 16384, 16385, 20000, 40003]


def load(path):
    spec = importlib.util.spec_from_file_location(f"user_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=["softmax", "rmsnorm"])
def problem(request):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    name = request.param
    return name, load(ROOT / "kernels" / f"{name}_cutedsl.py"), load(ROOT / "references" / f"{name}.py")


def check(problem, inputs, dtype):
    _, module, ref = problem
    out = module.custom_kernel(*inputs)
    torch.cuda.synchronize()
    expected = ref.ref_kernel(*inputs)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), expected.float(), atol=atol, rtol=rtol)


def gpu_inputs(problem, rows, cols, dtype, seed=0):
    return [t.cuda() for t in problem[2].generate_input(seed, rows=rows, cols=cols, dtype=dtype)]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("cols", WIDTHS)
def test_every_width_matches_the_reference(problem, cols, dtype):
    check(problem, gpu_inputs(problem, 5, cols, dtype), dtype)


@pytest.mark.parametrize("offset", [0, 1, 4])
def test_row_views_off_16_bytes_or_with_gaps_between_rows_match_the_reference(problem, offset):
    rows, cols = 67, 1024
    x, *rest = gpu_inputs(problem, rows, cols + 8, "float32")
    inputs = [x[:, offset : offset + cols], *(t[:cols] for t in rest)]
    check(problem, inputs, "float32")


def test_fp16_and_a_row_count_not_a_multiple_of_rows_per_cta_match_the_reference(problem):
    check(problem, gpu_inputs(problem, 7, 96, "float16"), "float16")  # 4 rows per CTA of 32 threads
    check(problem, gpu_inputs(problem, 1001, 1000, "float32"), "float32")  # 2 rows per CTA
