"""Per-line figures of two versions side by side, lines matched by their text where numbers moved."""

from pathlib import Path

import pytest

from ktui.history import linediff
from ktui.measure import hotspots

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent.parent / "fixtures" / "hotspots" / "h200"  # README.md there: recorded on an H200
NAME = "softmax_triton.py"
SOURCE = "softmax_triton_source.py"


def _data(source: str) -> dict:
    listing = (FIXTURES / "softmax_triton.sass").read_text()
    ptx = (FIXTURES / "softmax_triton.ptx").read_text()
    return hotspots.to_json(hotspots.attribute(listing, NAME, source, ptx), NAME)


def test_lines_moved_by_an_edit_above_are_matched_by_their_text():
    base_source = (FIXTURES / SOURCE).read_text()
    # The same compiled code, its source two lines lower: a comment block added above the kernel.
    new_source = "# one\n# two\n" + base_source
    base = _data(base_source)
    new = hotspots.to_json([hotspots.FunctionHotspots(
        f["name"], [hotspots.LineFigures(x["line"] + 2, x["text"], x["counts"]) for x in f["lines"]], {})
        for f in base["functions"]], NAME)
    result = linediff.compare(base, base_source, new, new_source)
    assert result["rows"] == [] and result["unchanged"] == len(base["functions"][0]["lines"])
    assert linediff.line_map(base_source, new_source)[20] == 22


def test_a_line_whose_instructions_changed_shows_both_sides_and_the_classes_that_moved():
    source = (FIXTURES / SOURCE).read_text()
    base = _data(source)
    new = _data(source)
    load = next(x for x in new["functions"][0]["lines"] if x["text"].startswith("x = tl.load("))
    loads = load["counts"]["global_load"]
    load["counts"]["global_load"] = 2 * loads  # twice the loads, as a narrower vector width would give
    result = linediff.compare(base, source, new, source)
    (row,) = result["rows"]
    assert (row["base_line"], row["new_line"]) == (load["line"], load["line"])
    assert row["base"]["counts"]["global_load"] == loads > 0 and row["new"]["counts"]["global_load"] == 2 * loads
    text = linediff.text({"base_version": 1, "new_version": 2, **result})
    assert f"gld {loads}→{2 * loads}" in text and "x = tl.load(" in text and "1 line(s) changed" in text


def test_measured_shares_ride_along_when_both_versions_were_profiled():
    source = (FIXTURES / SOURCE).read_text()
    data = _data(source)
    measured = {"kernels": [{"hot_lines": [{"line": 22, "share": 0.5}]}]}
    other = {"kernels": [{"hot_lines": [{"line": 22, "share": 0.25}]}]}
    (row,) = linediff.compare(data, source, data, source, measured, other)["rows"]
    assert row["new_line"] == 22 and (row["base"]["share"], row["new"]["share"]) == (0.5, 0.25)
