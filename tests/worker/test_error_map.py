"""The error map on synthetic outputs: each rule names its pattern from the exact positions, and
names none where the positions do not hold it; the grid stays small and says the same."""

from __future__ import annotations

import json

import pytest
import torch

from ktui.protocol.errormap import (
    MAX_COLS,
    MAX_JSON_BYTES,
    MAX_ROWS,
    ErrorMap,
    cell_char,
    level_of,
    read_cell,
    text_lines,
)
from ktui.worker.errormap import locate, reduce
from ktui.worker.metrics import compare
from ktui.worker.tier import fill_poison

pytestmark = pytest.mark.unit


def ref_of(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def wrong_where(ref: torch.Tensor, index) -> torch.Tensor:
    """``ref`` with every element at ``index`` off by one (beyond any tolerance)."""
    out = ref.clone()
    out[index] += 1.0
    return out


def described(out: torch.Tensor, ref: torch.Tensor, **kw) -> ErrorMap:
    found = locate(out, ref, **kw)
    assert found is not None
    return found


# -- each rule, on the mask it names ----------------------------------------------------------
def test_a_missing_tail_of_every_row_is_named_by_its_columns():
    found = described(wrong_where(ref_of(128, 115), (slice(None), slice(112, 115))), ref_of(128, 115))
    assert found.description == "all mismatches in cols 112–114 of every row (the last 3 columns)"
    assert found.pattern == "product" and found.mismatched == 384


def test_the_second_half_of_the_rows_is_named_as_such():
    ref = ref_of(8192, 16)
    found = described(wrong_where(ref, slice(4096, None)), ref)
    assert found.description == "all mismatches in rows 4096–8191 only (the second half)"


def test_a_block_of_columns_repeated_to_the_end_is_every_nth_block():
    ref = ref_of(64, 2048)
    out = ref.clone()
    for start in range(0, 2048, 512):
        out[:, start:start + 128] += 1.0
    found = described(out, ref)
    assert found.description == ("all mismatches in every 4th block of 128 columns (cols 0–127, 512–639, …) "
                                 "of every row")


def test_nan_in_one_row_is_named_with_its_kind():
    ref = ref_of(64, 100)
    out = ref.clone()
    out[0] = float("nan")
    found = described(out, ref)
    assert found.description == "NaN in row 0 only (the first row)"
    assert found.kinds == {"nan": 100}


def test_elements_never_written_are_told_from_computed_nans_by_ktuis_poison():
    ref = ref_of(128, 115)
    out = fill_poison(torch.empty(128, 115))  # as the correctness rung hands the kernel its buffers
    out[:, :112] = ref[:, :112]
    found = described(out, ref)
    assert found.description == "never written: cols 112–114 of every row (the last 3 columns)"
    assert found.kinds == {"unwritten": 384}
    assert {read_cell(ch)[0] for line in found.grid for ch in line} == {None, "unwritten"}


def test_a_tail_missed_in_both_dimensions_is_a_cross_of_whole_rows_and_columns():
    ref = ref_of(100, 115)
    out = wrong_where(ref, (slice(None), slice(112, 115)))
    out[96:] += 1.0
    found = described(out, ref)
    assert found.pattern == "cross"
    assert found.description == ("all mismatches in cols 112–114 of every row (the last 3 columns) and rows 96–99 of "
                                 "every column (the last 4 rows)")


def test_mismatches_on_one_diagonal_are_named_by_it():
    ref = ref_of(100, 100)
    out = ref.clone()
    out.diagonal(3).add_(1.0)
    assert described(out, ref).description == "all mismatches on the diagonal (col = row + 3) only"


def test_a_race_in_one_warps_lanes_is_named_by_its_columns_and_the_rows_it_hit():
    ref = ref_of(64, 1024)
    out = ref.clone()
    gen = torch.Generator().manual_seed(1)
    hit = [3, 9, 20, 41]
    for row in hit:  # lanes 32-63 of every block of 128 columns, some of them, in a few rows
        for block in range(0, 1024, 128):
            out[row, block + 32:block + 64] += (torch.rand(32, generator=gen) < 0.5).float() + (block == 0)
    found = described(out, ref)
    assert found.pattern == "blocks"
    assert found.description.startswith("all mismatches within cols 32–63 of each block of 128 columns (in all 8 "
                                        "blocks), in 4 of 64 rows: ")


def test_a_race_that_hit_every_lane_of_the_warp_is_every_nth_block_of_its_columns():
    ref = ref_of(64, 1024)
    out = ref.clone()
    for block in range(0, 1024, 128):
        out[[3, 9, 20], block + 32:block + 64] += 1.0
    out[3, 40] = ref[3, 40]  # not every element of those rows and columns
    found = described(out, ref)
    assert found.pattern == "columns"
    assert found.description.startswith("all mismatches in every 4th block of 32 columns, from col 32 "
                                        "(cols 32–63, 160–191, …), in 3 of 64 rows: ")


def test_rows_partly_wrong_are_named_with_the_share_they_hold():
    ref = ref_of(128, 115)
    out = ref.clone()
    half = torch.rand(20, 115, generator=torch.Generator().manual_seed(3)) < 0.5
    out[40:60] += half.float()
    found = described(out, ref)
    assert found.pattern == "rows"
    assert found.description == f"all mismatches in rows 40–59: {int(half.sum())} of their {20 * 115} elements"


def test_three_elements_or_fewer_are_named_one_by_one():
    ref = ref_of(128, 115)
    out = ref.clone()
    out[5, 7] += 1.0
    out[90, 100] = float("inf")
    found = described(out, ref)
    assert found.description == "only 2 elements wrong (1 beyond tolerance, 1 Inf): [5, 7] and [90, 100]"


def test_every_element_wrong_says_so():
    ref = ref_of(32, 32)
    assert described(ref + 1.0, ref).description == "all mismatches in every element"


def test_the_tail_of_a_vector_is_named_by_its_elements():
    ref = ref_of(12345)
    out = ref.clone()
    out[12288:] = 0.0
    found = described(out, ref)
    assert found.description == "all mismatches in elements 12288–12344 only (the last 57 elements)"
    assert found.rows == 1 and len(found.grid) == 1


def test_leading_dimensions_are_folded_and_the_slices_named():
    ref = ref_of(4, 32, 40)
    found = described(wrong_where(ref, (slice(None), slice(None), slice(38, 40))), ref)
    assert found.slices == 4 and found.rows == 32 and found.cols == 40
    assert found.description == ("all mismatches in cols 38–39 of every row (the last 2 columns), in every one of the "
                                 "4 slices")
    found = described(wrong_where(ref, slice(2, None)), ref)
    assert found.description == "all mismatches in slices 2–3 of the 4 only (the second half)"


def test_a_scattered_output_is_said_to_have_no_pattern():
    ref = ref_of(128, 115)
    out = ref.clone()
    flat = torch.randperm(ref.numel(), generator=torch.Generator().manual_seed(2))[:37]
    out.view(-1)[flat] += 5.0
    found = described(out, ref)
    assert found.pattern == "scattered"
    assert found.description.startswith("scattered (no pattern): 37 mismatches in ")


# -- no pattern the data does not show ------------------------------------------------------------
def test_blocks_that_stop_before_the_end_are_listed_not_called_regular():
    ref = ref_of(16, 2048)
    out = ref.clone()
    for start in (0, 512, 1024):  # the fourth repetition (1536) is missing
        out[:, start:start + 128] += 1.0
    assert described(out, ref).description == "all mismatches in cols 0–127, 512–639 and 1024–1151 of every row"


def test_two_repetitions_are_too_few_to_call_regular():
    ref = ref_of(16, 1024)
    out = ref.clone()
    out[:, 0:8] += 1.0
    out[:, 512:520] += 1.0
    assert "every" not in described(out, ref).description.split(" of every row")[0]


def test_blocks_of_unequal_width_are_not_regular():
    ref = ref_of(16, 64)
    out = ref.clone()
    for start, width in ((0, 4), (16, 4), (32, 5), (48, 4)):
        out[:, start:start + width] += 1.0
    found = described(out, ref)
    assert "every" not in found.description.split(" of every row")[0], found.description


def test_a_stripe_with_one_element_right_is_not_called_every_row_of_it():
    ref = ref_of(128, 115)
    out = wrong_where(ref, (slice(None), slice(112, 115)))
    out[5, 113] = ref[5, 113]
    found = described(out, ref)
    assert found.pattern == "columns"
    assert found.description == ("all mismatches in cols 112–114 (the last 3 columns), in every row: "
                                 "383 of the 384 elements there")


def test_a_cross_with_one_element_right_is_not_a_cross():
    ref = ref_of(100, 115)
    out = wrong_where(ref, (slice(None), slice(112, 115)))
    out[96:] += 1.0
    out[3, 114] = ref[3, 114]
    assert described(out, ref).pattern != "cross"


def test_few_mismatches_on_several_diagonals_are_not_named_diagonals():
    ref = ref_of(100, 100)
    out = ref.clone()
    for r, c in ((1, 1), (2, 2), (3, 3), (4, 4), (10, 50), (20, 90)):
        out[r, c] += 1.0
    assert described(out, ref).pattern not in ("diagonal", "product")


def test_an_output_within_tolerance_has_no_map():
    ref = ref_of(64, 64)
    assert locate(ref * (1 + 1e-7), ref) is None
    assert reduce(ref.clone(), ref) is None


# -- what the map holds ----------------------------------------------------------------------------
def test_the_map_counts_what_the_comparison_counts():
    ref = ref_of(97, 3001)
    out = ref.clone()
    out[:, -17:] *= 1.01
    out[50, 3] = float("nan")
    found = described(out, ref)
    finite = out.clone()
    finite[50, 3] = ref[50, 3]  # compare stops counting at a non-finite value: count the rest without it
    assert found.kinds == {"wrong": compare(finite, ref).figures["mismatched"], "nan": 1}
    assert found.mismatched == sum(found.kinds.values())


def test_the_chunks_the_output_is_walked_in_do_not_change_the_map():
    ref = ref_of(300, 257)
    out = wrong_where(ref, (slice(7, 300, 7), slice(None)))
    out[:, 250:] = float("nan")
    whole = described(out, ref)  # one chunk of whole rows, dense: counted as row and column sums
    assert described(out, ref, chunk=1000).to_json() == whole.to_json()
    assert described(out, ref, chunk=200).to_json() == whole.to_json()  # pieces of rows: counted by position
    assert described(out.t().contiguous().t(), ref, chunk=997).to_json() == whole.to_json()


@pytest.mark.parametrize("shape", [(1,), (7,), (1 << 20,), (3, 5), (4096, 4096), (2, 3, 4, 5, 6, 7),
                                   (1, 1, 1, 1, 1, 1, 1, 1, 97, 1001)])
def test_the_map_stays_within_its_grid_and_its_json_size(shape):
    ref = ref_of(*shape)
    out = ref.clone()
    flat = out.view(-1)
    flat[:: max(1, flat.numel() // 5000)] = float("nan")  # cells of every kind and density
    flat[1:: 3] += 1.0
    found = described(out, ref)
    assert len(found.grid) <= MAX_ROWS and all(len(line) <= MAX_COLS for line in found.grid)
    assert len({len(line) for line in found.grid}) == 1
    assert len(json.dumps(found.to_json())) <= MAX_JSON_BYTES
    assert ErrorMap.from_json(json.loads(json.dumps(found.to_json()))) == found


def test_a_cell_s_character_says_its_worst_kind_and_how_much_of_it_mismatches():
    ref = ref_of(24, 64)  # the largest grid: one element a cell
    out = ref.clone()
    out[0, 0] += 1.0  # the cell at [0, 0]: all of it wrong
    out[1, 1] = float("nan")
    found = described(out, ref)
    assert found.cell_rows == 1 and found.cell_cols == 1
    assert found.grid[0][0] == "9" and found.grid[1][1] == "i" and found.grid[2][2] == "."


def test_the_text_drawing_labels_its_axes_and_names_the_kinds():
    ref = ref_of(128, 115)
    found = described(wrong_where(ref, (slice(None), slice(112, 115))), ref)
    lines = text_lines(found, height=8)
    assert lines[0] == found.description
    assert lines[1].strip().startswith("0 │") and lines[-4].strip().startswith("127 │")
    assert lines[-2].strip().startswith("0") and lines[-2].rstrip().endswith("114")
    assert "384 beyond tolerance" in lines[-1]


def test_low_precision_outputs_are_mapped_beyond_a_few_rounding_steps():
    ref = ref_of(256, 300).bfloat16()
    out = ref.clone()
    out[:, 256:] += 1.0
    found = described(out, ref)
    assert found.description.startswith("all mismatches in cols 256–299")
    noise = (ref.double() * (1 + 2 ** -9)).bfloat16()  # one rounding step, everywhere
    assert locate(noise, ref) is None


def test_integer_outputs_are_mapped_exactly():
    ref = torch.arange(200).view(10, 20)
    out = ref.clone()
    out[:, 19] += 1
    assert described(out, ref).description == "all mismatches in col 19 of every row (the last column)"


def test_columns_spread_over_most_of_each_block_are_not_named_a_span_of_it():
    ref = ref_of(64, 1024)
    out = ref.clone()
    gen = torch.Generator().manual_seed(4)
    for block in range(0, 1024, 128):
        out[[3, 9], block:block + 96] += (torch.rand(2, 96, generator=gen) < 0.5).float() + (block == 0)
    found = described(out, ref)
    assert found.pattern == "scattered", found.description


def test_the_grid_s_levels_are_the_protocol_s_ninths_rounded_up():
    ref = ref_of(7, 640)  # cells of 10 columns, one row each
    out = ref.clone()
    for col in range(64):  # cell j holds j % 11 mismatches of its 10 elements, capped at 10
        n = min(10, col % 11)
        out[col % 7, col * 10: col * 10 + n] += 1.0
    found = described(out, ref)
    assert found.cell_cols == 10 and found.cell_rows == 1
    for col in range(64):
        n = min(10, col % 11)
        assert found.grid[col % 7][col] == cell_char("wrong" if n else None, level_of(n, 10)), col
