"""The shipped RMSNorm and bf16 matmul pass their references on the CPU tier (Triton's interpreter).

The other shipped kernels are run by the watch, dashboard and history tests; these two are not.
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
