"""A compile failure says the compiler's own words and where they point in the user's file, through a
real ``ktui run --json`` on the CPU tier (each kernel compiled for sm_90a): nvcc's ``error:`` line of
TileLang's generated CUDA (not its first line, ``#if defined(_MSC_VER) …``), nvcc's ``fatal error`` of
a toolkit without its CCCL headers, TileLang's lowering at the fragment it names, ptxas's errors
under Triton, and CuTeDSL's IR verification at the op it names. The recorded texts of the same
refusals: tests/worker/test_compiler_errors.py."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs
from cuda_toolkits import installed_toolkit, toolkit_without_cccl

pytestmark = pytest.mark.worker

needs = {"tilelang": "tilelang", "cutlass": "nvidia-cutlass-dsl"}
MISSING = [f"{pip} is not installed" for name, pip in needs.items() if importlib.util.find_spec(name) is None]
if shutil.which("nvcc") is None:
    MISSING.append("nvcc is not on PATH")


def marked_line(kernel: Path) -> int:
    return next(n for n, line in enumerate(kernel.read_text().splitlines(), 1) if "ERROR-LINE" in line)


@pytest.mark.skipif(bool(MISSING), reason="; ".join(MISSING))
def test_each_dsls_compile_failure_says_its_compilers_own_line_at_the_users_line(tmp_path):
    kernels = ["tilelang_nvcc_error", "tilelang_layout_error", "triton_ptxas_error", "cutedsl_ir_error"]
    ws = make_workspace(tmp_path / "ws", fixtures=kernels)
    proc = ktui("run", "--cpu", "--no-bench", "--no-audit", "--json", *(f"kernels/{k}.py" for k in kernels), cwd=ws)
    runs = by_kernel(parse_events(proc.stdout))
    assert set(runs) == set(kernels), proc.stderr[-2000:]
    said = {k: rungs(runs[k])["compile"] for k in kernels}
    for kernel, rung in said.items():
        assert rung["status"] == "failed", (kernel, rung["message"])
        summary = finished(runs[kernel])["summary"]["first_failure"]
        assert summary["rung"] == "compile" and summary["message"] == rung["message"].splitlines()[0]

    nvcc = said["tilelang_nvcc_error"]
    assert nvcc["message"].startswith('RuntimeError: nvcc: tvm_kernels.cu(19): error: identifier '
                                      '"ktui_no_such_function" is undefined'), nvcc["message"]
    assert "#if defined" not in nvcc["message"]
    lowering = said["tilelang_layout_error"]
    assert "Check failed: " in lowering["message"] and "f: (i,) and (255 - i,)" in lowering["message"]
    assert lowering["error"]["location"]["line"] == marked_line(ws / "kernels" / "tilelang_layout_error.py")
    ptxas = said["triton_ptxas_error"]
    assert ptxas["message"].startswith("PTXASError: ptxas: Unknown modifier '.bogus'"), ptxas["message"]
    cute = said["cutedsl_ir_error"]
    assert "'cute.copy' op S ptr alignment (128 bits) does not meet requirement (1024 bits)" in cute["message"]
    assert cute["error"]["location"]["line"] == marked_line(ws / "kernels" / "cutedsl_ir_error.py")


@pytest.mark.skipif(bool(MISSING) or installed_toolkit() is None, reason="; ".join(MISSING) or "no CUDA toolkit")
def test_a_toolkit_without_cccl_headers_says_nvccs_fatal_error_and_what_to_install(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_tilelang"])
    cuda = toolkit_without_cccl(tmp_path / "cuda")
    proc = ktui("run", "--cpu", "--no-bench", "--no-audit", "--json", "kernels/add_tilelang.py", cwd=ws,
                env={"CUDA_HOME": str(cuda)})
    events = parse_events(proc.stdout)
    compile_rung = rungs(events)["compile"]
    first, hint = compile_rung["message"].splitlines()[:2]
    assert re.fullmatch(r"RuntimeError: nvcc: [\w.]+:\d+:\d+: fatal error: nv/target: No such file or directory",
                        first), first  # the header that includes it, at the toolkit's own line
    assert "pip install nvidia-cuda-cccl" in hint
    assert finished(events)["summary"]["first_failure"]["message"] == first
