"""The shipped RMSNorm and bf16 matmul pass their references on the CPU tier (Triton's interpreter),
and the shipped CuTeDSL softmax and RMSNorm compile there (their checks need a GPU).

The other shipped kernels are run by the watch, dashboard and history tests; these are not.
"""

import pytest
from conftest import finished, ktui, make_workspace, parse_events, rungs


@pytest.mark.parametrize("kernel", ["rmsnorm_triton", "gemm_bf16_triton"])
def test_a_shipped_kernel_is_correct_on_every_test_shape_of_its_reference(tmp_path, kernel):
    root = make_workspace(tmp_path / "ws", kernels=[kernel])
    proc = ktui("run", "--cpu", "--no-bench", "--json", f"kernels/{kernel}.py", cwd=root)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    checks = {name: r["status"] for name, r in rungs(events).items() if name.startswith("correctness[")}
    assert len(checks) >= 5 and set(checks.values()) == {"ok"}, checks
    assert finished(events)["verdict"] == "passed"


@pytest.mark.parametrize("kernel", ["softmax_cutedsl", "rmsnorm_cutedsl"])
def test_a_shipped_cutedsl_kernel_compiles_on_the_cpu_tier_and_leaves_its_checks_to_a_gpu(tmp_path, kernel):
    root = make_workspace(tmp_path / "ws", kernels=[kernel])
    proc = ktui("run", "--cpu", "--no-bench", "--json", f"kernels/{kernel}.py", cwd=root)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    r = rungs(events)
    assert r["compile"]["status"] == "ok" and r["compile"]["figures"]["arch"] == "sm_90a"
    (sass,) = r["dumps"]["figures"]["functions"].values()
    assert sass["spill_instructions"] == 0 and sass["local"] == 0
    checks = [v for name, v in r.items() if name.startswith("correctness[")]
    assert len(checks) >= 6 and all(v["status"] == "skipped" and "need a GPU" in v["message"] for v in checks)
    assert finished(events)["verdict"] == "passed"
