"""A kernel hanging on the GPU: the timeout reads the worker's whole stack dump, and a fresh worker
runs the next kernel.

On the GPU the hang is in the device's loop, so the worker's main thread waits in a C call (the
launch queue or a synchronisation): the message names the user's line when a workspace frame is on
the stack, and otherwise says the stack was complete but had none. Run on a CUDA machine with
``python -m pytest -m gpu``; CPU runs skip these.
"""

from __future__ import annotations

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]


def test_on_the_gpu_a_kernel_hanging_in_its_loop_times_out_with_its_whole_stack_read(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang_in_jit"])
    proc = ktui("run", "--no-audit", "kernels/hang_in_jit.py", "kernels/add_triton.py", "--json", "--no-bench", "--seed", "0",
                "--timeout", "compile=30", "--timeout", "run=10", "--timeout", "correctness=10", cwd=ws, timeout=600)
    kernels = by_kernel(parse_events(proc.stdout))
    hung = next(r for r in rungs(kernels["hang_in_jit"]).values() if r["status"] == "timed_out")
    message = hung["message"]
    assert "had not arrived in full" not in message and "wrote no Python stack" not in message, message
    assert "it was at kernels/hang_in_jit.py:" in message or "no frame in the workspace's files" in message, message
    assert "_run_module_as_main" in hung["error"]["traceback"]  # the dump, read to its end, is kept
    assert finished(kernels["hang_in_jit"])["verdict"] == "timed_out"
    assert finished(kernels["add_triton"])["verdict"] == "passed"  # a fresh worker, a usable GPU
