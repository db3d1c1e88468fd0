"""The shipped RMSNorm and bf16 matmul pass their references on the CPU tier (Triton's interpreter),
and the shipped CuTeDSL kernels compile there (their checks need a GPU): ``compiled``, never ``passed``.

The other shipped kernels are run by the watch, dashboard and history tests; these are not.
"""

import json

import pytest
from conftest import finished, ktui, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker


@pytest.mark.parametrize("kernel", ["rmsnorm_triton", "gemm_bf16_triton"])
def test_a_shipped_kernel_is_correct_on_every_test_shape_of_its_reference(tmp_path, kernel, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=[kernel])
    proc = warm_ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", f"kernels/{kernel}.py", cwd=root)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    checks = {name: r["status"] for name, r in rungs(events).items() if name.startswith("correctness[")}
    assert len(checks) >= 5 and set(checks.values()) == {"ok"}, checks
    assert finished(events)["verdict"] == "passed"


@pytest.mark.parametrize("kernel", ["softmax_cutedsl", "rmsnorm_cutedsl"])
def test_a_shipped_cutedsl_kernel_compiles_on_the_cpu_tier_and_leaves_its_checks_to_a_gpu(tmp_path, kernel, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=[kernel])
    proc = warm_ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", f"kernels/{kernel}.py", cwd=root)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    r = rungs(events)
    assert r["compile"]["status"] == "ok" and r["compile"]["figures"]["arch"] == "sm_90a"
    (sass,) = r["dumps"]["figures"]["functions"].values()
    assert sass["spill_instructions"] == 0 and sass["local"] == 0
    checks = [v for name, v in r.items() if name.startswith("correctness[")]
    assert len(checks) >= 6 and all(v["status"] == "skipped" and "need a GPU" in v["message"] for v in checks)
    end = finished(events)
    assert end["verdict"] == "compiled"
    assert end["summary"]["compile_only"] == "CPU tier: CuTeDSL compiled for sm_90a only, not run"


def test_a_mixed_run_reads_kernel_by_kernel_cutedsl_compiled_triton_passed_and_exits_0(tmp_path, warm_ktui):
    root = make_workspace(tmp_path / "ws", kernels=["add_cutedsl", "add_triton"])
    proc = warm_ktui("run", "--no-audit", "--cpu", "--no-bench", "kernels/", cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    headers = [line for line in lines if line.startswith("== ")]
    summaries = [line for line in lines if line.startswith(("add_cutedsl v1 ", "add_triton v1 "))]
    assert headers == [
        "== add_cutedsl v1 (kernels/add_cutedsl.py → references/add.py) · cpu · CPU tier: CuTeDSL compiled for sm_90a "
        "only, not run",
        "== add_triton v1 (kernels/add_triton.py → references/add.py) · cpu · CPU (Triton interpreter) · sm_90a",
    ], headers
    assert summaries[0].startswith("add_cutedsl v1 compiled · not run: CuTeDSL kernels need a GPU"), summaries
    assert summaries[1].startswith("add_triton v1 passed · 5/5 correct"), summaries
    latest = json.loads((root / ".ktui" / "latest" / "add_cutedsl.json").read_text())
    assert latest["verdict"] == "compiled" and "not run" in latest["summary"]["compile_only"]
    history = warm_ktui("history", "kernels/add_cutedsl.py", cwd=root)
    assert " add_cutedsl v1 compiled · " in history.stdout, history.stdout


@pytest.mark.gpu
def test_on_the_gpu_a_cutedsl_kernel_runs_and_passes_under_the_devices_header(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path / "ws", kernels=["add_cutedsl"])
    proc = ktui("run", "--no-audit", "--no-bench", "kernels/add_cutedsl.py", cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("== add_cutedsl v1 ") and " · gpu · " in lines[0] and "not run" not in lines[0], lines[0]
    assert lines[-1].startswith("add_cutedsl v1 passed · 5/5 correct"), lines[-1]
