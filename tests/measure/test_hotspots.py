"""Static hot spots: SASS instructions attributed to the kernel's own lines, from the compiler output
recorded on an H200 (``tests/fixtures/hotspots/h200/README.md`` says how it was made); the masked
load's line correction from the CPU tier's older Triton build (``tests/fixtures/hotspots/README.md``)."""

import json
import shutil
from pathlib import Path

import pytest

from ktui.measure import hotspots, sass

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hotspots"
H200 = FIXTURES / "h200"


def _attributed(kernel: str) -> dict:
    source = (H200 / f"{kernel}_source.py").read_text()
    listing = (H200 / f"{kernel}.sass").read_text()
    ptx = (H200 / f"{kernel}.ptx").read_text()
    (fn,) = hotspots.to_json(hotspots.attribute(listing, f"{kernel}.py", source, ptx), f"{kernel}.py")["functions"]
    return fn


def _line_of(source: str, needle: str, after: str = "") -> int:
    """The line holding ``needle``, the first one after the line holding ``after``."""
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i, line in enumerate(lines[start:], start + 1) if needle in line)


def _opcodes(kernel: str) -> list[str]:
    """Every instruction's opcode in the recorded listing, up to the end of the code."""
    (lines,) = sass.split_functions((H200 / f"{kernel}.sass").read_text()).values()
    ops = [m.group(1) for m in map(sass._INSTR.match, lines) if m]
    return ops[: sass.instruction_count(lines)]


def _class_total(fn: dict, cls: str) -> int:
    return (sum(x["counts"].get(cls, 0) for x in fn["lines"])
            + sum(e["counts"].get(cls, 0) for e in fn["elsewhere"]))


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
@pytest.mark.parametrize("kernel", ["softmax_triton", "gemm_bf16_triton", "gemm_bf16_cutedsl"])
def test_the_cpu_attribution_is_what_ktui_wrote_on_the_h200(kernel):
    recorded = json.loads((H200 / f"{kernel}_hotspots.json").read_text())
    assert {"source": f"{kernel}.py", "classes": list(hotspots.CLASSES), "functions": [_attributed(kernel)]} == recorded


@pytest.mark.unit
def test_triton_matmul_dot_line_holds_mma_and_its_descriptor_loads_the_tma_copies():
    source = (H200 / "gemm_bf16_triton_source.py").read_text()
    fn = _attributed("gemm_bf16_triton")
    assert fn["name"] == "matmul_tma"
    lines = {x["line"]: x for x in fn["lines"]}
    ops = _opcodes("gemm_bf16_triton")
    # Every HGMMA of the listing is counted, and the tl.dot line holds some: ptxas's line table puts
    # the others of the unrolled k-steps on the loop's line, where the instructions around them are.
    assert _class_total(fn, "mma") == sum(op.startswith("HGMMA") for op in ops) > 0
    dot = lines[_line_of(source, "acc = tl.dot(a, b, acc)", after="def matmul_tma")]
    assert dot["text"] == "acc = tl.dot(a, b, acc)" and dot["counts"]["mma"] > 0
    assert {n for n, x in lines.items() if x["counts"].get("mma")} <= {
        dot["line"], _line_of(source, "for kt in tl.range(", after="def matmul_tma")}
    # The two descriptor loads are the only global loads (UTMALDG), the descriptor store the only store.
    load_a = lines[_line_of(source, "a = a_desc.load(", after="def matmul_tma")]
    load_b = lines[_line_of(source, "b = b_desc.load(", after="def matmul_tma")]
    assert load_a["counts"]["global_load"] > 0 and load_b["counts"]["global_load"] > 0
    assert _class_total(fn, "global_load") == load_a["counts"]["global_load"] + load_b["counts"]["global_load"] == (
        sum(op.startswith("UTMALDG") for op in ops))
    store = lines[_line_of(source, "c_desc.store(", after="def matmul_tma")]
    assert store["counts"]["global_store"] == _class_total(fn, "global_store") == sum(op.startswith("UTMASTG") for op in ops)
    assert _class_total(fn, "spill") == 0


@pytest.mark.unit
def test_triton_library_lines_are_grouped_and_named_and_nothing_is_lost():
    fn = _attributed("gemm_bf16_triton")
    assert [e["file"] for e in fn["elsewhere"]] == ["Triton library (standard.py)"]
    assert fn["total"] == len(_opcodes("gemm_bf16_triton"))


@pytest.mark.unit
def test_cutedsl_gemm_lines_hold_the_wgmma_and_tma_copies():
    source = (H200 / "gemm_bf16_cutedsl_source.py").read_text()
    fn = _attributed("gemm_bf16_cutedsl")
    lines = {x["line"]: x for x in fn["lines"]}
    ops = _opcodes("gemm_bf16_cutedsl")
    assert _class_total(fn, "mma") == sum(op.startswith("HGMMA") for op in ops) > 0
    mma_lines = {n for n, x in lines.items() if x["counts"].get("mma")}
    first_gemm = _line_of(source, "cute.gemm(tiled_mma, acc, tCrA[")
    # The k-loop's cute.gemm( spans three lines; its arguments' line is the one the line table names.
    loop_gemm = _line_of(source, "tiled_mma, acc, tCrA[", after="for _ in range(1, k_tiles)")
    assert {first_gemm, loop_gemm} <= mma_lines
    assert max(mma_lines, key=lambda n: lines[n]["counts"]["mma"]) == loop_gemm
    tma_a, tma_b = _line_of(source, "cute.copy(tma_a, "), _line_of(source, "cute.copy(tma_b, ")
    assert lines[tma_a]["counts"]["global_load"] > 0 and lines[tma_b]["counts"]["global_load"] > 0  # UTMALDG
    tma_c = _line_of(source, "cute.copy(tma_c, ")
    assert lines[tma_c]["counts"]["global_store"] == _class_total(fn, "global_store") > 0  # UTMASTG
    assert [e["file"] for e in fn["elsewhere"]] == ["ktui's DSL glue (cutedsl.py)"]
    assert fn["total"] == len(ops) and _class_total(fn, "spill") == 0


@pytest.mark.unit
def test_softmax_loads_and_stores_are_on_their_lines_and_the_reductions_in_triton_library():
    source = (H200 / "softmax_triton_source.py").read_text()
    fn = _attributed("softmax_triton")
    lines = {x["line"]: x for x in fn["lines"]}
    ops = _opcodes("softmax_triton")
    load, store = _line_of(source, "x = tl.load("), _line_of(source, "tl.store(")
    assert [n for n, x in lines.items() if x["counts"].get("global_load")] == [load]
    assert lines[load]["counts"]["global_load"] == sum(op.startswith("LDG") for op in ops) > 0
    assert [n for n, x in lines.items() if x["counts"].get("global_store")] == [store]
    # tl.max and tl.sum are inlined from Triton's standard.py: their shuffles and the shared-memory
    # exchange between warps are grouped under it.
    (library,) = fn["elsewhere"]
    assert library["file"] == "Triton library (standard.py)"
    assert library["counts"]["shared_load"] > 0 and library["counts"]["shared_store"] > 0


@pytest.mark.unit
def test_triton_masked_loads_are_put_on_their_tl_load_line_not_where_inline_asm_drifts():
    # The CPU tier's older Triton (PTX 9.4) wrote the masked load as a four-line inline asm whose
    # .loc count on (20, 21, 22, 23): the LDG would land on line 23, the division, without the PTX's
    # correction. (The H200 build's Triton emits no such block.)
    source = (FIXTURES / "softmax_triton.py").read_text()
    listing = (FIXTURES / "softmax_triton.sass").read_text()
    ptx = (FIXTURES / "softmax_triton.ptx").read_text()
    (fn,) = hotspots.to_json(hotspots.attribute(listing, "softmax_triton.py", source, ptx), "softmax_triton.py")["functions"]
    (uncorrected,) = hotspots.to_json(hotspots.attribute(listing, "softmax_triton.py", source), "softmax_triton.py")["functions"]
    lines = {x["line"]: x for x in fn["lines"]}
    load = _line_of(source, "x = tl.load(")
    division = _line_of(source, "out = num")
    assert [x["line"] for x in uncorrected["lines"] if x["counts"].get("global_load")] == [division]
    assert [n for n, x in lines.items() if x["counts"].get("global_load")] == [load]
    assert lines[load]["counts"]["global_load"] == _class_total(uncorrected, "global_load") > 0
    assert [n for n, x in lines.items() if x["counts"].get("global_store")] == [_line_of(source, "tl.store(")]


@pytest.mark.unit
def test_text_shows_a_gutter_of_counts_beside_each_source_line():
    fn = _attributed("gemm_bf16_triton")
    text = hotspots.render_text({"source": "gemm_bf16_triton.py", "functions": [fn]}, top=3)
    rows = [r for r in text.splitlines() if r.strip().endswith(("acc = tl.dot(a, b, acc)", "[Triton library (standard.py)]"))]
    assert len(rows) == 1 and "gld" in text and "mma" in text  # tl.dot (23 instructions) is not in the top 3
    assert len([r for r in text.splitlines() if r[:6].strip().isdigit()]) == 3


@pytest.mark.worker
def test_a_run_folder_without_hotspots_json_is_rebuilt_from_its_cubin_and_source(tmp_path):
    assert hotspots.load(tmp_path) is None
    shutil.copy(H200 / "gemm_bf16_triton.cubin", tmp_path / "matmul_tma.cubin")
    shutil.copy(H200 / "gemm_bf16_triton_source.py", tmp_path / "source.py")
    (tmp_path / "report.json").write_text(json.dumps({"path": "/elsewhere/kernels/gemm_bf16_triton.py"}))
    data = hotspots.load(tmp_path)
    assert data["source"] == "gemm_bf16_triton.py"
    (fn,) = data["functions"]
    assert fn["name"] == "matmul_tma" and fn == _attributed("gemm_bf16_triton")
