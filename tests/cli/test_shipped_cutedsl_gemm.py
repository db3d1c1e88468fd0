"""The shipped CuTeDSL bf16 matmul compiles for sm_90a on the CPU tier, into a WGMMA + TMA kernel.

Nothing runs without a GPU, so this holds what can be held here: the compile and dumps rungs pass,
and what was built is the kernel the module describes (the GPU tier checks its answers).
"""

import json
from pathlib import Path

import pytest
from conftest import finished, ktui, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker


def test_the_cutedsl_gemm_compiles_for_sm90a_into_wgmma_fed_by_tma(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["gemm_bf16_cutedsl"])
    proc = ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", "kernels/gemm_bf16_cutedsl.py", cwd=root)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    r = rungs(events)
    assert r["compile"]["status"] == "ok" and r["compile"]["figures"]["arch"] == "sm_90a", r["compile"]
    assert r["dumps"]["status"] == "ok"
    assert finished(events)["verdict"] == "compiled"  # compiled and dumped, not run: not a pass

    run_dir = Path(events[0]["run_dir"])
    ptx = (run_dir / "gemm_launcher.ptx").read_text()
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cta.global" in ptx  # TMA loads into shared memory
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx  # TMA stores of the epilogue
    assert "setmaxnreg.inc.sync.aligned.u32 \t232" in ptx  # the consumer warpgroups' registers
    sass = (run_dir / "gemm_launcher.sass").read_text()
    assert "HGMMA.64x256x16.F32.BF16" in sass and ".tnspB" in sass  # b read N-major, as stored
    (resources,) = json.loads((run_dir / "resources.json").read_text()).values()
    assert resources["spill_instructions"] == 0 and resources["local"] == 0
    (fn,) = json.loads((run_dir / "hotspots.json").read_text())["functions"]
    source = (root / "kernels" / "gemm_bf16_cutedsl.py").read_text().splitlines()
    mma = [x for x in fn["lines"] if x["counts"].get("mma")]
    assert any("cute.gemm(" in source[x["line"] - 1] for x in mma), mma  # WGMMA on the gemm calls' lines
    tma_loads = [x["line"] for x in fn["lines"] if x["counts"].get("global_load")]
    assert tma_loads and all("cute.copy(tma_" in source[n - 1] for n in tma_loads)
