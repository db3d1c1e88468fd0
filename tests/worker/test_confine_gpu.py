"""Confined on the GPU: CUDA, Triton and CuTeDSL work under the Landlock ruleset, every shipped
kernel passes, and a kernel still cannot rewrite the history.

Run on a CUDA machine with ``python -m pytest -m gpu tests/worker/test_confine_gpu.py``.
"""

import json
import sqlite3

import pytest
from conftest import REPO, by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.measure import sass
from ktui.protocol.processes import NO_CONFINE_ENV

# One ``ktui run`` of every shipped kernel (TileLang's and CuTeDSL's GEMMs compile for tens of
# seconds) with its benchmark: beside the GPU tier's three other test processes it waits for their
# timed sections at every rung, and took longer than the suite's 300 s on the H200 (2026-12-03).
pytestmark = [pytest.mark.gpu, pytest.mark.worker, pytest.mark.timeout(540)]

SHIPPED = sorted(p.stem for p in (REPO / "kernels").glob("*.py"))
DENIED = ("Permission denied", "PermissionError", "Read-only file system", "readonly database")


@pytest.fixture(scope="module")
def confined_gpu_run(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path_factory.mktemp("confined_gpu"), kernels=SHIPPED, hacks=["rewrites_history"])
    proc = ktui("run", "--no-audit", "--json", "-v", "--seed", "2", "--bench-time", "1", "kernels/", cwd=root, timeout=1800,
                env={NO_CONFINE_ENV: ""})
    return root, proc, by_kernel(parse_events(proc.stdout))


@pytest.mark.parametrize("name", SHIPPED)
def test_each_shipped_kernel_passes_every_rung_confined_on_the_gpu(confined_gpu_run, name):
    _, proc, kernels = confined_gpu_run
    assert name in kernels, proc.stderr[-3000:]
    events = kernels[name]
    start = events[0]
    assert start["tier"] == "gpu", start
    assert start["confined"] is True and start["confinement"].startswith("landlock ABI "), start
    bad = {k: (v["status"], v["message"]) for k, v in rungs(events).items()
           if v["status"] not in ("ok", "skipped") or any(word in v["message"] for word in DENIED)}
    assert not bad, bad
    done = finished(events)
    assert done["verdict"] == "passed" and done["summary"]["confined"] is True
    printed = [e["text"] for e in events if e["type"] == "output"]
    assert not [line for line in printed if any(word in line for word in DENIED)], printed


def test_a_kernel_cannot_rewrite_the_history_on_the_gpu(confined_gpu_run):
    root, _, kernels = confined_gpu_run
    hack = kernels["hack_rewrites_history"]
    assert finished(hack)["verdict"] == "failed"
    assert "readonly database" in json.dumps(finished(hack)["summary"]), finished(hack)
    db = sqlite3.connect(root / ".ktui" / "history.db")
    try:
        verdicts = dict(db.execute("SELECT kernel, verdict FROM runs"))
    finally:
        db.close()
    assert verdicts["hack_rewrites_history"] == "failed"
    assert all(verdicts[name] == "passed" for name in SHIPPED)


def test_every_cubin_is_disassembled_as_nvdisasm_prints_it_with_its_dataflow_analysis(confined_gpu_run):
    """The dumps disassemble without nvdisasm's dataflow analysis (``-ndf``, a quarter sooner): on a
    Hopper CUBIN of each DSL the listing is nvdisasm's own, byte for byte."""
    root, _, _ = confined_gpu_run
    cubins = sorted((root / ".ktui" / "runs").glob("*/*/*.cubin"))
    dsls = {entry["dsl"] for folder in {c.parent for c in cubins}
            for entry in json.loads((folder / "resources.json").read_text()).values()}
    assert {"triton", "cutedsl", "tilelang"} <= dsls, dsls
    for cubin in cubins:
        assert cubin.with_suffix(".sass").read_text() == sass._run([sass.find_tool("nvdisasm"), "-c", str(cubin)]), cubin
