"""Measured hot spots: Nsight Compute's per-instruction page aggregated to the kernel's lines.

The pages are recorded on an H200 (``tests/fixtures/hotspots/h200/README.md``): ``<k>_source.csv``
is ``ncu --import R --page source --csv --print-source sass`` of ``ktui profile``'s report, read here
with the line table of the same build's SASS and PTX; ``<k>_hotspots_measured.json`` is what ktui
wrote from them on the H200.
"""

import json
import shutil
from pathlib import Path

import pytest

from ktui.measure import hotspots
from ktui.profiling.ncu import source as ncu_source

H200 = Path(__file__).parent.parent / "fixtures" / "hotspots" / "h200"
KERNELS = ["softmax_triton", "gemm_bf16_triton", "gemm_bf16_cutedsl"]


def _page(kernel: str) -> dict:
    return ncu_source.parse_source_page((H200 / f"{kernel}_source.csv").read_text())


def _static(kernel: str) -> dict:
    return hotspots.attribute_offsets((H200 / f"{kernel}.sass").read_text(), (H200 / f"{kernel}.ptx").read_text())


def _source(kernel: str) -> str:
    return (H200 / f"{kernel}_source.py").read_text()


def _measured(kernel: str) -> dict:
    return ncu_source.aggregate(_page(kernel), _static(kernel), f"{kernel}.py", _source(kernel))


def _line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


def _without_readings(data: dict) -> dict:
    data = json.loads(json.dumps(data))
    for k in data["kernels"]:
        for x in k["hot_lines"] + k["elsewhere"]:
            x.pop("reading")
    return data


@pytest.mark.unit
def test_the_page_is_read_per_kernel_by_column_name():
    text = (H200 / "gemm_bf16_triton_source.csv").read_text()
    page = ncu_source.parse_source_page("==PROF== Disconnected\n" + text)
    (rows,) = page.values()
    assert list(page) == ["matmul_tma"]
    instrs = ncu_source.instruction_rows(rows)
    assert len(instrs) == len(rows) == len(_static("gemm_bf16_triton")["matmul_tma"])
    assert instrs[0]["offset"] == 0 and instrs[1]["offset"] == 0x10  # offsets from the kernel's first instruction
    assert [r["opcode"] for r in instrs] == [op for _, (_, _, op) in sorted(_static("gemm_bf16_triton")["matmul_tma"].items())]
    assert sum(r["samples"] for r in instrs) > 0 and all(set(r["stalls"]) <= set(ncu_source.READINGS) for r in instrs)


@pytest.mark.unit
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_cpu_aggregation_of_the_recorded_page_is_what_ktui_wrote_on_the_h200(kernel):
    # The figures and their order are the H200's; the readings are compared without, as the short
    # stall names of the source page (mio, imc…) had none there.
    recorded = json.loads((H200 / f"{kernel}_hotspots_measured.json").read_text())
    measured = _measured(kernel)
    assert not measured["notes"] and _without_readings(measured) == _without_readings(recorded)
    for k in measured["kernels"]:
        for x in k["hot_lines"] + k["elsewhere"]:
            assert x["reading"] == ncu_source.reading(x) and x["reading"] != x["stalls"][0][0]


@pytest.mark.unit
def test_softmax_samples_wait_on_global_memory_in_the_inlined_reductions_and_drain_at_the_store():
    source = _source("softmax_triton")
    (kernel,) = _measured("softmax_triton")["kernels"]
    assert kernel["function"] == "softmax_kernel"
    # tl.max and tl.sum are Triton library code (standard.py) inlined without call sites in the line
    # table: the waits on the loaded row land on their first instructions, grouped under the library.
    (library,) = kernel["elsewhere"]
    assert library["file"] == "Triton library (standard.py)"
    assert library["stalls"][0][0] == "long_sb" and library["reading"] == "waiting on global memory"
    assert library["share"] > sum(x["share"] for x in kernel["hot_lines"])
    # Of the kernel's own lines the store is the hottest, draining at exit; the load line carries the traffic.
    top = kernel["hot_lines"][0]
    assert top["line"] == _line_of(source, "tl.store(") and top["file"] == "softmax_triton.py"
    assert top["stalls"][0][0] == "drain" and top["reading"] == "draining stores at exit"
    lines = {x["line"]: x for x in kernel["hot_lines"]}
    load = lines[_line_of(source, "x = tl.load(")]
    assert load["classes"]["global_load"] > 0 and load["memory"]["L2 Theoretical Sectors Global"] > 0
    assert _line_of(source, "num = tl.exp(x)") in lines
    shares = [x["share"] for x in kernel["hot_lines"]]
    assert shares == sorted(shares, reverse=True) and sum(shares) + library["share"] <= 1


@pytest.mark.unit
def test_triton_matmul_waits_on_its_tma_loads_in_the_k_loop_and_the_dot_line_is_hot():
    source = _source("gemm_bf16_triton")
    (kernel,) = _measured("gemm_bf16_triton")["kernels"]
    assert kernel["function"] == "matmul_tma"
    top = kernel["hot_lines"][0]
    assert top["line"] == _line_of(source, "for kt in tl.range(")
    assert top["stalls"][0][0] == "long_sb" and top["reading"] == "waiting on global memory"
    lines = {x["line"]: x for x in kernel["hot_lines"]}
    dot = lines[_line_of(source, "acc = tl.dot(a, b, acc)")]
    assert dot["classes"]["mma"] > 0 and dot is kernel["hot_lines"][1]
    assert dot["reading"] == "waiting at a barrier for the other warps"
    assert {_line_of(source, "a = a_desc.load("), _line_of(source, "b = b_desc.load(")} <= set(lines)
    assert len(kernel["hot_lines"]) == ncu_source.TOP_LINES


@pytest.mark.unit
def test_cutedsl_matmul_waits_on_its_wgmma_group_and_the_gemm_line_is_hot():
    source = _source("gemm_bf16_cutedsl")
    (kernel,) = _measured("gemm_bf16_cutedsl")["kernels"]
    top = kernel["hot_lines"][0]
    assert top["text"] == "warpgroup.wait_group(1)" and top["reading"] == "waiting at a barrier for the other warps"
    lines = {x["line"]: x for x in kernel["hot_lines"]}
    gemm = lines[_loop_gemm(source)]
    assert gemm["classes"]["mma"] > 0 and gemm["stalls"][0][0] == "mio"
    assert gemm["reading"] == "shared-memory / special-math queue full"
    acquire = lines[_line_of(source, "ring.producer_acquire(write)")]
    assert acquire["reading"] == "waiting on global memory"
    assert [e["file"] for e in kernel["elsewhere"]] == ["ktui's DSL glue (cutedsl.py)"]


def _loop_gemm(source: str) -> int:
    """The argument line of the k-loop's three-line ``cute.gemm(`` call (the line table names it)."""
    lines = source.splitlines()
    loop = next(i for i, line in enumerate(lines) if "for _ in range(1, k_tiles)" in line)
    return next(i for i, line in enumerate(lines[loop:], loop + 1) if "tiled_mma, acc, tCrA[" in line)


@pytest.mark.unit
def test_a_profile_of_another_build_is_told_not_attributed():
    page = _page("gemm_bf16_triton")
    (rows,) = page.values()
    for row in rows:
        row["Source"] = "FFMA R1, R2, R3, R4"
    result = ncu_source.aggregate(page, _static("gemm_bf16_triton"), "gemm_bf16_triton.py", _source("gemm_bf16_triton"))
    assert "another build" in result["notes"][0] and result["kernels"][0]["hot_lines"] == []


@pytest.mark.unit
def test_text_names_file_line_share_and_reading():
    text = ncu_source.render_text(_measured("gemm_bf16_cutedsl"))
    assert f"gemm_bf16_cutedsl.py:{_line_of(_source('gemm_bf16_cutedsl'), 'warpgroup.wait_group(1)')}" in text and "waiting at a barrier" in text and "[ktui's DSL glue (cutedsl.py)]" in text


@pytest.mark.worker
def test_the_run_folders_cubin_gives_the_line_table(tmp_path):
    shutil.copy(H200 / "gemm_bf16_triton.cubin", tmp_path / "matmul_tma.cubin")
    shutil.copy(H200 / "gemm_bf16_triton.ptx", tmp_path / "matmul_tma.ptx")
    shutil.copy(H200 / "gemm_bf16_triton_source.py", tmp_path / "source.py")
    data = ncu_source.aggregate_run(_page("gemm_bf16_triton"), tmp_path, "gemm_bf16_triton.py")
    assert not data["notes"] and data == _measured("gemm_bf16_triton")


@pytest.mark.unit
def test_a_page_without_instruction_rows_is_an_error():
    with pytest.raises(ncu_source.SourcePageError):
        ncu_source.parse_source_page('"ID","Kernel Name"\n"0","k"\n')
