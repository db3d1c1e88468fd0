"""The GPU tier: every rung runs on the device, including CuTeDSL and the benchmark.

Run on a CUDA machine with ``python -m pytest -m gpu``; CPU runs skip these.
"""

import json
from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path_factory.mktemp("gpu"), kernels=["add_triton", "softmax_triton", "add_cutedsl"],
                          fixtures=["oob_write", "crash_segfault", "partial_write"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "3", "--bench-time", "1", "kernels/", cwd=root, timeout=900)
    return root, proc, by_kernel(parse_events(proc.stdout))


@pytest.mark.parametrize("name", ["add_triton", "softmax_triton", "add_cutedsl"])
def test_shipped_kernels_pass_every_rung_on_the_gpu(gpu_run, name):
    _, _proc, kernels = gpu_run
    events = kernels[name]
    start = events[0]
    assert start["tier"] == "gpu" and start["arch"].startswith("sm_")
    r = rungs(events)
    bad = {k: (v["status"], v["message"]) for k, v in r.items() if v["status"] != "ok"}
    assert not bad, bad
    benches = [v for k, v in r.items() if k.startswith("benchmark[")]
    assert benches
    for b in benches:
        f = b["figures"]
        assert f["kernel_us"] > 0 and f["ref_us"] > 0 and f["speedup"] > 0
        assert f.get("gbps", 0) > 0
    assert finished(events)["verdict"] == "passed"


def test_gpu_dumps_are_what_ran(gpu_run):
    _, _, kernels = gpu_run
    run_dir = Path(kernels["softmax_triton"][0]["run_dir"])
    ptx = (run_dir / "softmax_kernel.ptx").read_text()
    assert ".target sm_90a" in ptx or ".target sm_" in ptx
    resources = json.loads((run_dir / "resources.json").read_text())
    assert resources["softmax_kernel"]["registers"] > 0
    cute_dir = Path(kernels["add_cutedsl"][0]["run_dir"])
    assert list(cute_dir.glob("*.sass")) and list(cute_dir.glob("*.mlir"))


def test_an_illegal_memory_access_ends_the_run_and_spares_the_next(gpu_run):
    _, _, kernels = gpu_run
    end = finished(kernels["oob_write"])
    assert end["verdict"] in ("crashed", "failed")
    text = json.dumps(kernels["oob_write"])
    assert "illegal" in text.lower() or "crashed" in end["verdict"]


def test_a_segfault_is_a_crash_verdict_on_the_gpu_too(gpu_run):
    assert finished(gpu_run[2]["crash_segfault"])["verdict"] == "crashed"


def test_unwritten_output_is_caught_on_the_gpu(gpu_run):
    r = rungs(gpu_run[2]["partial_write"])
    assert r["correctness[size=12345]"]["status"] == "failed"
    assert "never written" in r["correctness[size=12345]"]["message"]
