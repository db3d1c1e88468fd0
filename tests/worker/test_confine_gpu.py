"""Confined on the GPU: CUDA, NVML, Triton, CuTeDSL and TileLang work under the Landlock ruleset and
the seccomp filter (the GPU's device nodes, /proc/driver/nvidia, /sys, the driver's libraries, its
threads' names in /proc: ``ktui.worker.confine.rules``), every shipped kernel passes, and a kernel
still cannot rewrite the history or reach out of its sandbox.

Run on a CUDA machine with ``python -m pytest -m gpu tests/worker/test_confine_gpu.py``.
"""

import json
import os
import socket
import sqlite3
import subprocess
import sys

import pytest
from conftest import REPO, by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.measure import sass
from ktui.protocol.processes import NO_CONFINE_ENV

# One ``ktui run`` of every shipped kernel (TileLang's and CuTeDSL's GEMMs compile for tens of
# seconds) with its benchmark: beside the GPU tier's three other test processes it waits for their
# timed sections at every rung, and took longer than the suite's 300 s on the H200 (2026-12-03).
pytestmark = [pytest.mark.gpu, pytest.mark.worker, pytest.mark.timeout(540)]

SHIPPED = sorted(p.stem for p in (REPO / "kernels").glob("*.py"))
DENIED = ("Permission denied", "PermissionError", "Read-only file system", "readonly database",
          "unable to open database")


@pytest.fixture(scope="module")
def confined_gpu_run(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path_factory.mktemp("confined_gpu"), kernels=SHIPPED,
                          hacks=["rewrites_history", "reaches_out"])
    with socket.create_server(("127.0.0.1", 0)) as listener:  # what the hack would reach, were the network open
        (root / "kernels" / "hack_reaches_out.port").write_text(str(listener.getsockname()[1]))
        proc = ktui("run", "--no-audit", "--json", "-v", "--seed", "2", "--bench-time", "1", "kernels/", cwd=root,
                    timeout=1800, env={NO_CONFINE_ENV: ""})
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
    assert "unable to open database" in json.dumps(finished(hack)["summary"]), finished(hack)
    db = sqlite3.connect(root / ".ktui" / "history.db")
    try:
        verdicts = dict(db.execute("SELECT kernel, verdict FROM runs"))
    finally:
        db.close()
    assert verdicts["hack_rewrites_history"] == "failed"
    assert all(verdicts[name] == "passed" for name in SHIPPED)


def test_a_kernel_reaches_nothing_outside_its_sandbox_on_the_gpu(confined_gpu_run):
    _, _, kernels = confined_gpu_run
    events = kernels["hack_reaches_out"]
    reached = dict(e["text"].removeprefix("reach ").split(": ", 1) for e in events
                   if e["type"] == "output" and e["text"].startswith("reach "))
    assert reached["history"] == reached["owner token"] == reached["shm"] == "PermissionError", reached
    assert reached["tcp"] == reached["udp"] == "OSError", reached
    assert finished(events)["verdict"] == "passed"


GPU_PROBE = r"""
import json, sys
from pathlib import Path
from ktui.worker.confine import confine

status = confine([Path(sys.argv[1])])
report = {"status": status.to_json()}
import torch
import triton
import triton.language as tl

@triton.jit
def twice(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

x = torch.ones(4096, device="cuda")
twice[(4,)](x, x.numel(), BLOCK=1024)
report["triton"] = float(x.sum())
report["driver"] = Path("/proc/driver/nvidia/version").read_text().split()[0]
try:
    import pynvml
    pynvml.nvmlInit()
    report["nvml"] = pynvml.nvmlDeviceGetCount()
except ImportError:
    report["nvml"] = "not installed"
print(json.dumps(report))
"""


def test_a_confined_process_reaches_the_gpu_through_cuda_nvml_and_triton(tmp_path):
    """What CUDA needs is allowed by construction: the device nodes, the driver's /proc and /sys
    entries and libraries, NVML, and its threads' names in /proc."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    proc = subprocess.run([sys.executable, "-c", GPU_PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), NO_CONFINE_ENV: ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.splitlines()[-1])
    assert report["status"]["confined"] is True, report
    assert report["triton"] == 8192.0 and report["driver"] == "NVRM"
    assert report["nvml"] == "not installed" or report["nvml"] >= 1


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
