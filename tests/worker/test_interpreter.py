"""Triton's interpreter inside the worker: library functions run as interpreted twins, fast and right."""

from __future__ import annotations

import pytest
import torch
import triton.language as tl
from triton.runtime import interpreter

from ktui.worker.dsl import triton_kernels
from ktui.worker.modules import load_module

pytestmark = pytest.mark.unit

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _centred(x):
    return x - tl.max(x, axis=0)


@triton.jit
def rows_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(_centred(x))
    soft = tl.softmax(x)  # a library function that calls others (max, sum)
    out = e / tl.sum(e, axis=0) + soft + tl.cdiv(n_cols, 7)
    tl.store(out_ptr + row * n_cols + cols, out, mask=mask)


def custom_kernel(x):
    out = torch.empty_like(x)
    rows_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
'''


def expected(x: torch.Tensor) -> torch.Tensor:
    return 2 * torch.softmax(x.double(), dim=1).float() + -(-x.shape[1] // 7)


@pytest.fixture
def module(tmp_path):
    path = tmp_path / "rows_kernel.py"
    path.write_text(KERNEL)
    with triton_kernels.TRITON.importing(interpreted=True):
        return load_module("ktui_test_rows_kernel", str(path))


@pytest.fixture
def patches(monkeypatch):
    """Counts Triton's language patches (one walk of ``triton.language`` each)."""
    calls = []
    original = interpreter._patch_lang

    def counted(fn):
        calls.append(fn.__name__)
        return original(fn)

    monkeypatch.setattr(interpreter, "_patch_lang", counted)
    return calls


def test_an_interpreted_kernel_with_library_and_own_device_functions_gives_the_right_answer(module):
    x = torch.randn(37, 300, generator=torch.Generator().manual_seed(1))
    with triton_kernels.interpreter_environment():
        out = module.custom_kernel(x)
    torch.testing.assert_close(out, expected(x), rtol=1e-5, atol=1e-5)


def test_library_calls_patch_the_language_once_per_launch_not_once_per_call(module, patches):
    x = torch.randn(64, 100, generator=torch.Generator().manual_seed(2))
    with triton_kernels.interpreter_environment():
        module.custom_kernel(x)
        module.custom_kernel(x)
    library = [name for name in patches if name != "rows_kernel" and name != "_centred"]
    assert patches.count("rows_kernel") == 2  # each launch patches once, as Triton does
    # every library call of every program patched it again before (768 patches here); now only
    # a call that finds a language module not yet patched in this launch does
    assert len(library) <= 2, library


def test_the_language_is_compiled_again_after_the_interpreter_is_left(module):
    with triton_kernels.interpreter_environment():
        module.custom_kernel(torch.randn(3, 5))
    assert tl.core.is_builtin(tl.program_id) and tl.core.is_builtin(tl.core.program_id)
    assert not isinstance(tl.max, interpreter.InterpretedFunction)
