"""The noise floor on the GPU tier: the compiled erf GELU saturates as the interpreted one does, and
compare judges device tensors by the same rule.

Run on a CUDA machine with ``python -m pytest -m gpu``; CPU runs skip these.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]

NOISE = Path(__file__).resolve().parent.parent / "fixtures" / "noise"


@pytest.fixture
def cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch


def test_on_the_gpu_a_saturated_gelu_passes_every_shape_with_a_no_signal_notice(cuda, tmp_path):
    ws = make_workspace(tmp_path / "ws")
    shutil.copy(NOISE / "gelu_erf.py", ws / "kernels" / "gelu_erf.py")
    shutil.copy(NOISE / "gelu_saturated.py", ws / "references" / "gelu_saturated.py")
    for seed in ("0", "1"):
        proc = ktui("run", "--no-audit", "kernels/gelu_erf.py", "--json", "--strict", "--no-bench", "--seed", seed, cwd=ws, timeout=600)
        events = by_kernel(parse_events(proc.stdout))["gelu_erf"]
        assert events[0]["tier"] == "gpu"
        checks = {name: r for name, r in rungs(events).items() if name.startswith("correctness[")}
        assert len(checks) == 3, proc.stderr
        for name, r in checks.items():
            assert r["status"] == "ok" and r["figures"]["no_signal"] is True, f"seed {seed}, {name}: {r['message']}"
        assert finished(events)["verdict"] == "passed"


def test_on_the_gpu_compare_applies_the_noise_floor_to_device_tensors(cuda):
    from ktui.worker.metrics import compare

    torch = cuda
    zero = compare(torch.zeros(1000, device="cuda"), torch.full((1000,), -7e-9, device="cuda"))
    assert zero.passed and zero.figures["no_signal"] is True, zero.reason
    half = compare(torch.full((64,), -1.79e-7, device="cuda").half(), torch.full((64,), -1.19e-7, device="cuda").half())
    assert half.passed and half.figures["no_signal"] is True, half.reason
    signal = (torch.rand(4096, device="cuda", dtype=torch.float64) * 1e-3).to(torch.bfloat16)
    judged = compare(torch.zeros_like(signal), signal)
    assert not judged.passed and "no_signal" not in judged.figures
