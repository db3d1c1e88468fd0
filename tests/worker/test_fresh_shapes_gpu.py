"""The ``fresh-shapes`` rung on the GPU tier: the shipped kernels, Triton and CuTeDSL, pass it; a
kernel tuned on the test sizes fails it and is not timed. Run on a CUDA machine with
``python -m pytest -m gpu``; CPU runs skip these."""

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]

SHIPPED = ["add_triton", "softmax_triton", "rmsnorm_triton", "gemm_bf16_triton",
           "add_cutedsl", "softmax_cutedsl", "rmsnorm_cutedsl", "gemm_bf16_cutedsl"]


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory):
    _cuda()
    root = make_workspace(tmp_path_factory.mktemp("gpu-fresh"), kernels=SHIPPED)
    proc = ktui("run", "--no-audit", "--json", "--seed", "3", "--no-bench", "kernels/", cwd=root, timeout=1200)
    return by_kernel(parse_events(proc.stdout))


@pytest.fixture(scope="module")
def tuned_run(tmp_path_factory):
    _cuda()
    root = make_workspace(tmp_path_factory.mktemp("gpu-tuned"), fixtures=["double_tuned", "double_honest"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "3", "--bench-time", "0.5", "kernels/", cwd=root, timeout=900)
    return by_kernel(parse_events(proc.stdout))


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_kernels_pass_fresh_shapes_on_the_gpu(shipped_run, name):
    events = shipped_run[name]
    assert events[0]["tier"] == "gpu"
    fresh = rungs(events)["fresh-shapes"]
    assert fresh["status"] == "ok", fresh["message"]
    assert len(fresh["figures"]["shapes"]) == 2
    assert finished(events)["verdict"] == "passed"


def test_a_kernel_tuned_on_the_test_sizes_fails_fresh_shapes_on_the_gpu_and_is_not_timed(tuned_run):
    events = tuned_run["double_tuned"]
    r = rungs(events)
    assert r["fresh-shapes"]["status"] == "failed"
    assert r["fresh-shapes"]["message"].startswith("wrong on a shape it was never shown: size=")
    bench = r["benchmark[size=1048576]"]
    assert bench["status"] == "skipped"
    assert bench["message"] == "wrong on a shape it was never shown: a fast wrong kernel is worth nothing"
    assert finished(events)["verdict"] == "failed"


def test_an_honest_kernel_passes_fresh_shapes_and_is_timed_on_the_gpu(tuned_run):
    events = tuned_run["double_honest"]
    r = rungs(events)
    assert r["fresh-shapes"]["status"] == "ok", r["fresh-shapes"]["message"]
    assert r["benchmark[size=1048576]"]["status"] == "ok"
    assert finished(events)["verdict"] == "passed"
