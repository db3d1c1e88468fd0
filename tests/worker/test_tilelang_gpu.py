"""The GPU tier for TileLang: the shipped TileLang kernels pass every rung, one that leaves an
output element unwritten fails, and one that returns torch's answer is suspicious.

Run on a CUDA machine with ``python -m pytest -m gpu``; written without one (not yet run on an H200).
"""

from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]

SHIPPED = ["add_tilelang", "softmax_tilelang", "rmsnorm_tilelang", "gemm_bf16_tilelang"]


@pytest.fixture(scope="module")
def tilelang_run(tmp_path_factory):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tilelang", reason="tilelang not installed (pip install 'ktui[tilelang]')")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path_factory.mktemp("gpu-tilelang"), kernels=SHIPPED,
                          fixtures=["tilelang_partial_write"], hacks=["tilelang_torch_answer"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "3", "--bench-time", "1", "kernels/", cwd=root, timeout=1800)
    return by_kernel(parse_events(proc.stdout))


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_tilelang_kernel_passes_every_rung_on_the_gpu(tilelang_run, name):
    events = tilelang_run[name]
    assert events[0]["tier"] == "gpu"
    r = rungs(events)
    bad = {k: (v["status"], v["message"]) for k, v in r.items() if v["status"] != "ok"}
    assert not bad, bad
    assert {"integrity", "dependence"} <= set(r) and any(k.startswith("benchmark[") for k in r)
    run_dir = Path(events[0]["run_dir"])
    assert list(run_dir.glob("*.cubin")) and list(run_dir.glob("*.sass")) and list(run_dir.glob("*.tir"))
    assert finished(events)["verdict"] == "passed"


def test_a_tilelang_kernel_that_leaves_an_output_element_unwritten_fails(tilelang_run):
    events = tilelang_run["tilelang_partial_write"]
    failed = [v for k, v in rungs(events).items() if k.startswith("correctness[") and v["status"] == "failed"]
    assert failed, rungs(events)
    assert finished(events)["verdict"] == "failed"


def test_a_tilelang_kernel_that_returns_torchs_answer_is_suspicious(tilelang_run):
    events = tilelang_run["hack_tilelang_torch_answer"]
    assert finished(events)["verdict"] == "suspicious", rungs(events)
