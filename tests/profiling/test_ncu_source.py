"""Measured hot spots: Nsight Compute's per-instruction page aggregated to the kernel's lines.

SYNTHETIC INPUT: ``ncu_source_synthetic.csv`` is hand-made (not recorded) — one row per
instruction of the real CPU-tier SASS of the Triton matmul, in the columns of ncu's source page
(``--page source --csv --print-source sass``), with samples put on its LDG (long scoreboard) and
HGMMA (math pipe throttle) instructions. The H200 recording of
``tests/benchmarks/record_hotspot_fixtures.sh`` replaces it.
"""

import shutil
from pathlib import Path

import pytest

from ktui.measure import hotspots
from ktui.profiling.ncu import source as ncu_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hotspots"
NAME = "gemm_bf16_triton.py"


@pytest.fixture(scope="module")
def measured():
    page = ncu_source.parse_source_page((FIXTURES / "ncu_source_synthetic.csv").read_text())
    return ncu_source.aggregate(page, _static(), NAME, (FIXTURES / NAME).read_text())


def _static():
    return hotspots.attribute_offsets((FIXTURES / "gemm_bf16_triton.sass").read_text(),
                                      (FIXTURES / "gemm_bf16_triton.ptx").read_text())


@pytest.mark.unit
def test_the_page_is_read_per_kernel_by_column_name():
    text = (FIXTURES / "ncu_source_synthetic.csv").read_text()
    page = ncu_source.parse_source_page("==PROF== Disconnected\n" + text)
    (rows,) = page.values()
    assert list(page) == ["matmul_pointers"] and len(rows) > 900
    instrs = ncu_source.instruction_rows(rows)
    assert instrs[0]["offset"] == 0 and instrs[1]["offset"] == 0x10  # offsets from the kernel's first instruction
    assert instrs[0]["opcode"] == "LDC"


@pytest.mark.unit
def test_the_load_lines_are_hot_waiting_on_global_memory(measured):
    (kernel,) = measured["kernels"]
    assert kernel["function"] == "matmul_pointers" and not measured["notes"]
    top = kernel["hot_lines"][0]
    assert top["text"].startswith("a = tl.load(") and top["file"] == NAME
    assert top["stalls"][0][0] == "long_sb" and top["reading"].startswith("waiting on global memory")
    assert top["memory"]["L2 Theoretical Sectors Global"] > 0
    lines = {x["text"]: x for x in kernel["hot_lines"]}
    assert lines["acc = tl.dot(a, b, acc)"]["reading"] == "tensor cores busy"
    shares = [x["share"] for x in kernel["hot_lines"]]
    assert shares == sorted(shares, reverse=True) and len(shares) == ncu_source.TOP_LINES and sum(shares) <= 1


@pytest.mark.unit
def test_a_profile_of_another_build_is_told_not_attributed():
    page = ncu_source.parse_source_page((FIXTURES / "ncu_source_synthetic.csv").read_text())
    (rows,) = page.values()
    for row in rows:
        row["Source"] = "FFMA R1, R2, R3, R4"
    result = ncu_source.aggregate(page, _static(), NAME, (FIXTURES / NAME).read_text())
    assert "another build" in result["notes"][0] and result["kernels"][0]["hot_lines"] == []


@pytest.mark.unit
def test_text_names_file_line_share_and_reading(measured):
    text = ncu_source.render_text(measured)
    assert f"{NAME}:" in text and "waiting on global memory" in text and "tensor cores busy" in text


@pytest.mark.worker
def test_the_run_folders_cubin_gives_the_line_table(tmp_path):
    shutil.copy(FIXTURES / "gemm_bf16_triton.cubin", tmp_path / "matmul_pointers.cubin")
    shutil.copy(FIXTURES / "gemm_bf16_triton.ptx", tmp_path / "matmul_pointers.ptx")
    shutil.copy(FIXTURES / NAME, tmp_path / "source.py")
    page = ncu_source.parse_source_page((FIXTURES / "ncu_source_synthetic.csv").read_text())
    data = ncu_source.aggregate_run(page, tmp_path, NAME)
    assert data["kernels"][0]["hot_lines"][0]["text"].startswith("a = tl.load(") and not data["notes"]


@pytest.mark.unit
def test_a_page_without_instruction_rows_is_an_error():
    with pytest.raises(ncu_source.SourcePageError):
        ncu_source.parse_source_page('"ID","Kernel Name"\n"0","k"\n')
