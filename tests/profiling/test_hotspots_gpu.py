"""On a GPU machine (``pytest -m gpu``): ``ktui profile`` names the hot lines of the shipped softmax
and matmuls and says why each is hot; the static figures of the same build are in the run folder."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import ktui, make_workspace, parse_events

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.worker]

KERNELS = ["softmax_triton", "gemm_bf16_triton", "gemm_bf16_cutedsl"]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA driver on this machine")
    root = make_workspace(tmp_path_factory.mktemp("hot"), kernels=KERNELS)
    proc = ktui("run", "--no-audit", "--no-bench", "--seed", "1", *(f"kernels/{k}.py" for k in KERNELS), cwd=root, timeout=900)
    assert "gpu" in proc.stdout, proc.stdout + proc.stderr
    return root


def _hot(root: Path, kernel: str) -> dict:
    proc = ktui("profile", f"kernels/{kernel}.py", "--json", cwd=root, timeout=900)
    last = parse_events(proc.stdout)[-1]
    assert last["ok"] is True and proc.returncode == 0, last["message"] + proc.stderr
    hot = last["summary"]["hotspots"]
    assert hot and hot["source"] == f"{kernel}.py", last["summary"]["notes"]
    assert not any("another build" in n for n in hot["notes"]), hot["notes"]
    return hot


def _source(root: Path, kernel: str) -> list[str]:
    return (root / "kernels" / f"{kernel}.py").read_text().splitlines()


def test_softmax_hot_lines_are_its_own_with_a_reading(ws):
    hot = _hot(ws, "softmax_triton")
    (k,) = hot["kernels"]
    assert k["samples"] > 0 and k["hot_lines"]
    source = _source(ws, "softmax_triton")
    for x in k["hot_lines"]:
        assert x["text"] == source[x["line"] - 1].strip() and x["reading"]
    load = next(x for x in k["hot_lines"] if "tl.load(" in x["text"])
    assert load["stalls"] and load["executed"] > 0
    assert (ws / ".ktui" / "runs" / "softmax_triton" / "1" / "hotspots_measured.json").is_file()


@pytest.mark.parametrize("kernel,mma_call", [("gemm_bf16_triton", "tl.dot("), ("gemm_bf16_cutedsl", "cute.gemm(")])
def test_matmul_hot_lines_include_the_mma_line_read_as_tensor_work_or_waiting_on_memory(ws, kernel, mma_call):
    hot = _hot(ws, kernel)
    lines = [x for k in hot["kernels"] for x in k["hot_lines"]]
    assert lines and all(x["reading"] for x in lines)
    mma = [x for x in lines if x["classes"].get("mma")]
    assert mma, [(x["line"], x["text"]) for x in lines]
    static = json.loads((ws / ".ktui" / "runs" / kernel / "1" / "hotspots.json").read_text())
    mma_lines = {x["line"] for f in static["functions"] for x in f["lines"] if x["counts"].get("mma")}
    source = _source(ws, kernel)
    assert any(mma_call in source[n - 1] for n in mma_lines)
