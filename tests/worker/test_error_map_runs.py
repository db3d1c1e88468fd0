"""The error map of planted bugs, through a real ``ktui run --json``: a missing tail mask, an
off-by-one row bound and a wrong stride on the CPU tier (Triton's interpreter), a race confined to
one warp's lanes on a GPU. The map is in the failing rung's figures, at the end of its message, in
the run's report, in the history and in ``ktui watch --headless``'s lines."""

from __future__ import annotations

import json

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events
from headless import Headless

PLANTED = ["tail_mask_missing", "row_bound_off_by_one", "wrong_stride"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory, warm_ktui):
    root = make_workspace(tmp_path_factory.mktemp("planted"), fixtures=PLANTED)
    proc = warm_ktui("run", "--no-audit", "--cpu", "--json", "--no-bench", "--seed", "1", "kernels/", cwd=root)
    return root, by_kernel(parse_events(proc.stdout))


def failing(events: list[dict]) -> dict:
    return next(e for e in events if e["type"] == "rung_finished" and e["status"] not in ("ok", "skipped"))


@pytest.mark.worker
def test_a_missing_tail_mask_is_named_by_the_columns_it_never_wrote(planted):
    _, runs = planted
    rung = failing(runs["tail_mask_missing"])
    assert rung["rung"] == "correctness[rows=128,cols=115]"
    described = "never written: cols 112–114 of every row (the last 3 columns)"
    assert rung["figures"]["error_map"]["description"] == described
    assert rung["figures"]["error_map"]["kinds"] == {"unwritten": 384}
    assert described in rung["message"].splitlines()[0]
    assert described in finished(runs["tail_mask_missing"])["summary"]["first_failure"]["message"]


@pytest.mark.worker
def test_an_off_by_one_row_bound_is_named_by_the_last_row(planted):
    _, runs = planted
    rung = failing(runs["row_bound_off_by_one"])
    # the run rung's output is not poisoned: what the allocator left there may hold a NaN (then it
    # fails there, every element of the row wrong), else the correctness rung finds ktui's poison
    assert rung["rung"] in ("run", "correctness[rows=40,cols=256]"), rung["message"]
    assert rung["figures"]["error_map"]["description"].endswith("row 39 only (the last row)")
    assert rung["figures"]["error_map"]["pattern"] == "product"


@pytest.mark.worker
def test_a_wrong_stride_is_named_by_the_rows_it_read_from_the_wrong_place(planted):
    _, runs = planted
    rung = failing(runs["wrong_stride"])
    assert rung["rung"] == "correctness[rows=40,cols=256]"
    found = rung["figures"]["error_map"]
    # every row but the first reads shifted data; by chance one may land within tolerance
    assert found["description"].startswith("all mismatches in rows 1–39"), found["description"]
    assert "(the last 39 rows)" in found["description"] and found["pattern"] in ("product", "rows")


@pytest.mark.worker
def test_the_map_is_kept_in_the_report_and_the_history(planted, warm_ktui):
    root, runs = planted
    rung = failing(runs["tail_mask_missing"])
    report = json.loads((root / ".ktui" / "latest" / "tail_mask_missing.json").read_text())
    kept = next(r for r in report["rungs"] if r["rung"] == rung["rung"])
    assert kept["figures"]["error_map"] == rung["figures"]["error_map"]
    history = parse_events(warm_ktui("history", "--json", "kernels/tail_mask_missing.py", cwd=root).stdout)
    stored = next(r for r in history[0]["rungs"] if r["rung"] == rung["rung"])
    assert stored["figures"]["error_map"] == rung["figures"]["error_map"]


@pytest.mark.worker
def test_headless_prints_the_map_with_its_line_and_grid(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["tail_mask_missing"])
    watch = Headless(ws, "--no-audit", "--cpu", "--no-bench")
    try:
        rung = watch.until(lambda e: e["type"] == "rung_finished" and "error_map" in e["figures"])
        found = rung["figures"]["error_map"]
        assert found["description"] == "never written: cols 112–114 of every row (the last 3 columns)"
        assert found["grid"] and all(line.endswith("II") for line in found["grid"])
    finally:
        assert watch.stop(timeout=30) == 0


@pytest.mark.worker
@pytest.mark.gpu
def test_a_race_in_one_warps_lanes_is_named_by_its_columns_of_each_block(tmp_path):
    """tests/fixtures/kernels/warp_race.py: warp 1 of each program (columns 32-63 of each block of
    128) reads its values back from a scratch buffer all programs share; only those lanes go wrong,
    in the rows where another program's write landed first."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path / "ws", fixtures=["warp_race"])
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--seed", "1", "kernels/warp_race.py", cwd=root)
    events = parse_events(proc.stdout)
    rung = failing(events)
    found = rung["figures"]["error_map"]
    assert found["pattern"] in ("blocks", "columns", "product"), found
    assert ("within cols 32–63 of each block of 128 columns" in found["description"]
            or "every 4th block of 32 columns, from col 32" in found["description"]), found["description"]
