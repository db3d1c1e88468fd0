"""Static hot spots: SASS instructions attributed to the kernel's own lines, from real compiler
output of the CPU tier (``tests/fixtures/hotspots/README.md`` says how it was made)."""

import json
import shutil
from pathlib import Path

import pytest

from ktui.measure import hotspots

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hotspots"


def _attributed(kernel: str) -> dict:
    source = (FIXTURES / f"{kernel}.py").read_text()
    listing = (FIXTURES / f"{kernel}.sass").read_text()
    ptx = (FIXTURES / f"{kernel}.ptx").read_text()
    (fn,) = hotspots.to_json(hotspots.attribute(listing, f"{kernel}.py", source, ptx), f"{kernel}.py")["functions"]
    return fn


def _line_of(source: str, needle: str, after: str = "") -> int:
    """The line holding ``needle``, the first one after the line holding ``after``."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i, line in enumerate(lines[start:], start + 1) if needle in line)


@pytest.mark.unit
def test_opcodes_fall_into_the_classes_a_reader_acts_on():
    assert hotspots.classify("LDG.E.128.CONSTANT") == "global_load"
    assert hotspots.classify("UTMALDG.2D") == "global_load"
    assert hotspots.classify("STG.E.U16") == "global_store"
    assert hotspots.classify("LDSM.16.M88.4") == "shared_load"
    assert hotspots.classify("HGMMA.64x128x16.F32.BF16") == "mma"
    assert hotspots.classify("FFMA.FTZ") == "fma"
    assert hotspots.classify("BRA.U") == "branch"
    assert hotspots.classify("STL.64") == "spill"
    assert hotspots.classify("IMAD.WIDE") == "other"


@pytest.mark.unit
def test_triton_matmul_dot_line_holds_the_mma_and_its_load_lines_the_global_loads():
    source = (FIXTURES / "gemm_bf16_triton.py").read_text()
    fn = _attributed("gemm_bf16_triton")
    assert fn["name"] == "matmul_pointers"
    lines = {x["line"]: x for x in fn["lines"]}
    dot = lines[_line_of(source, "acc = tl.dot(a, b, acc)", after="def matmul_pointers")]
    assert dot["text"] == "acc = tl.dot(a, b, acc)" and dot["counts"]["mma"] >= 4
    load_a = _line_of(source, "a = tl.load(", after="def matmul_pointers")
    load_b = _line_of(source, "b = tl.load(", after="def matmul_pointers")
    assert lines[load_a]["counts"]["global_load"] > 0 and lines[load_b]["counts"]["global_load"] > 0
    assert sum(x["counts"].get("global_load", 0) for x in fn["lines"]) == (
        lines[load_a]["counts"]["global_load"] + lines[load_b]["counts"]["global_load"])
    store = lines[_line_of(source, "tl.store(c, acc.to(tl.bfloat16)", after="def matmul_pointers")]
    assert store["counts"]["global_store"] > 0
    assert sum(x["counts"].get("spill", 0) for x in fn["lines"]) == 0


@pytest.mark.unit
def test_triton_library_lines_are_grouped_and_named_and_nothing_is_lost():
    fn = _attributed("gemm_bf16_triton")
    assert [e["file"] for e in fn["elsewhere"]] == ["Triton library (standard.py)"]
    listing = (FIXTURES / "gemm_bf16_triton.sass").read_text()
    from ktui.measure import sass
    (lines,) = sass.split_functions(listing).values()
    assert fn["total"] == sass.instruction_count(lines)


@pytest.mark.unit
def test_cutedsl_gemm_lines_hold_the_wgmma_and_tma_copies():
    source = (FIXTURES / "gemm_bf16_cutedsl.py").read_text()
    fn = _attributed("gemm_bf16_cutedsl")
    lines = {x["line"]: x for x in fn["lines"]}
    mma_lines = {n for n, x in lines.items() if x["counts"].get("mma")}
    first_gemm = _line_of(source, "cute.gemm(tiled_mma, acc, tCrA[")
    assert first_gemm in mma_lines
    tma_b = _line_of(source, "cute.copy(tma_b, ")
    assert lines[tma_b]["counts"]["global_load"] > 0  # UTMALDG
    tma_c = _line_of(source, "cute.copy(tma_c, ")
    assert lines[tma_c]["counts"]["global_store"] > 0  # UTMASTG
    assert all(not e["file"].startswith("Triton") for e in fn["elsewhere"])


@pytest.mark.unit
def test_triton_masked_loads_are_put_on_their_tl_load_line_not_where_inline_asm_drifts():
    # Triton's masked load is a four-line inline asm whose .loc count on (20, 21, 22, 23): the
    # LDG would land on line 23, the division, without the PTX's correction.
    source = (FIXTURES / "softmax_triton.py").read_text()
    fn = _attributed("softmax_triton")
    lines = {x["line"]: x for x in fn["lines"]}
    load = _line_of(source, "x = tl.load(")
    assert lines[load]["counts"]["global_load"] == 4
    assert [n for n, x in lines.items() if x["counts"].get("global_load")] == [load]
    assert [n for n, x in lines.items() if x["counts"].get("global_store")] == [_line_of(source, "tl.store(")]


@pytest.mark.unit
def test_text_shows_a_gutter_of_counts_beside_each_source_line():
    fn = _attributed("gemm_bf16_triton")
    text = hotspots.render_text({"source": "gemm_bf16_triton.py", "functions": [fn]}, top=3)
    rows = [r for r in text.splitlines() if r.strip().endswith(("acc = tl.dot(a, b, acc)", "[Triton library (standard.py)]"))]
    assert rows and "gld" in text and "mma" in text
    assert len([r for r in text.splitlines() if r[:6].strip().isdigit()]) == 3


@pytest.mark.worker
def test_a_run_folder_without_hotspots_json_is_rebuilt_from_its_cubin_and_source(tmp_path):
    assert hotspots.load(tmp_path) is None
    shutil.copy(FIXTURES / "gemm_bf16_triton.cubin", tmp_path / "matmul_pointers.cubin")
    shutil.copy(FIXTURES / "gemm_bf16_triton.py", tmp_path / "source.py")
    (tmp_path / "report.json").write_text(json.dumps({"path": "/elsewhere/kernels/gemm_bf16_triton.py"}))
    data = hotspots.load(tmp_path)
    assert data["source"] == "gemm_bf16_triton.py"
    (fn,) = data["functions"]
    assert fn["name"] == "matmul_pointers" and fn == _attributed("gemm_bf16_triton")
