"""A compiler's own words out of the text a DSL wraps them in (``ktui.worker.dsl.compiler_errors``),
read from the refusals recorded from real compiles (``tests/fixtures/compile_errors/``, README there)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, REPO

from ktui.worker.dsl import compiler_errors
from ktui.worker.dsl.tilelang_kernels import TILELANG, _mark

pytestmark = pytest.mark.unit

RECORDED = FIXTURES / "compile_errors"


def recorded(case: str) -> str:
    return (RECORDED / f"{case}.txt").read_text().replace("@REPO@", str(REPO))


def marked_line(kernel: Path) -> int:
    return next(n for n, line in enumerate(kernel.read_text().splitlines(), 1) if "ERROR-LINE" in line)


def test_nvccs_error_line_and_the_generated_line_it_names_not_the_sources_first_line():
    said = compiler_errors.nvcc_message(recorded("tilelang_nvcc"))
    first, quoted = said.splitlines()
    assert first == 'nvcc: tvm_kernels.cu(19): error: identifier "ktui_no_such_function" is undefined'
    assert quoted.strip().startswith("Out[") and "ktui_no_such_function(X[" in quoted
    assert "#if defined" not in said and "warning" not in said


def test_a_missing_cccl_header_is_nvccs_fatal_error_with_what_to_install():
    said = compiler_errors.nvcc_message(recorded("tilelang_missing_header"))
    assert said.splitlines() == ["nvcc: cuda_fp16.h:4492:10: fatal error: nv/target: No such file or directory",
                                 compiler_errors.CCCL_HINT]
    assert "nvidia-cuda-cccl" in said


def test_lowerings_check_and_the_line_it_points_at():
    text = recorded("tilelang_layout")
    assert compiler_errors.first_words(text) == ("Check failed: (StructuralEqual()(it->second.indices, indices)) is "
                                                 "false: f: (i,) and (255 - i,)")
    kernel = FIXTURES / "kernels" / "tilelang_layout_error.py"
    assert compiler_errors.pointer(text, {str(kernel)}) == (str(kernel), marked_line(kernel), 1)
    assert compiler_errors.pointer(text, {str(REPO / "kernels" / "add_tilelang.py")}) is None  # not the user's


def test_ptxas_errors_each_once_not_tritons_wrapper_line():
    said = compiler_errors.ptxas_message(recorded("triton_ptxas"))
    assert said.startswith("ptxas: Unknown modifier '.bogus' (PTX line ")
    assert "; Not a name of any known instruction: 'ktui' (PTX line " in said
    assert "Internal Triton PTX codegen error" not in said and said.count("Unknown modifier") == 1


def test_cutedsls_ir_verification_points_at_the_op_in_the_kernel():
    kernel = FIXTURES / "kernels" / "cutedsl_ir_error.py"
    assert compiler_errors.pointer(recorded("cutedsl_ir"), {str(kernel)}) == (str(kernel), marked_line(kernel), 4)


def test_the_tilelang_adapter_places_nvccs_words_and_lowerings_line():
    nvcc = RuntimeError(recorded("tilelang_nvcc"))
    _mark(nvcc)
    placed = TILELANG.place(nvcc, set(), [])
    assert placed.message.startswith('nvcc: tvm_kernels.cu(19): error: identifier "ktui_no_such_function"')
    kernel = FIXTURES / "kernels" / "tilelang_layout_error.py"
    lowering = RuntimeError(recorded("tilelang_layout"))
    _mark(lowering)
    placed = TILELANG.place(lowering, {str(kernel)}, [])
    assert placed.location.line == marked_line(kernel) and placed.message.startswith("Check failed:")
    assert TILELANG.place(RuntimeError("not a compile"), set(), []) is None  # unmarked: not the compiler's
