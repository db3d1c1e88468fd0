"""Nsight Compute CSV → summary.

Two kinds of input. ``RAW``/``DETAILS`` below follow the layout of ncu's CSV exports (header row,
a units row on the raw page, quoted values with thousands separators, rule rows with their
estimated speedups on the details page, ``==PROF==`` lines around the table); they pin the
parser's rules. The recorded exports in tests/fixtures/gpu/ (made on the H200 by
tests/benchmarks/record_gpu_fixtures.sh, see the README there) are what ncu really wrote; those
tests skip until the fixtures are checked in.
"""

import json
from pathlib import Path

import pytest

from ktui.profiling.ncu import (
    KernelProfile,
    NcuParseError,
    NcuSummary,
    csv_rows,
    latest,
    load,
    merge,
    missing_notes,
    parse_details,
    parse_raw,
    stalls_of,
    summarise_launches,
    write,
)

pytestmark = pytest.mark.unit

GPU_FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu"

_ID = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC"'
RAW = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    "==PROF== Profiling \"row_stats_kernel\" - 0: 0%....50%....100% - 9 passes",
    _ID + ',"device__attribute_display_name","gpu__time_duration.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed",'
    '"sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active",'
    '"launch__registers_per_thread","launch__shared_mem_per_block_static","launch__shared_mem_per_block_dynamic",'
    '"lts__t_sector_hit_rate.pct","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",'
    '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"',
    '"","","","","","","","","","","","","ns","%","%","%","register/thread","byte/block","byte/block","%","inst","inst","inst","inst"',
    '"0","4242","python3.12","127.0.0.1","row_stats_kernel","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","NVIDIA H200",'
    '"12,288","81.50","22.25","70.00","16","0","1,024","3.10","6","2","1","2"',
    '"1","4242","python3.12","127.0.0.1","normalise_kernel","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","NVIDIA H200",'
    '"20,480","90.00","30.00","80.00","18","0","0","48.00","3","0","1","1"',
    '"2","4242","python3.12","127.0.0.1","row_stats_kernel","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","NVIDIA H200",'
    '"12,288","83.50","24.25","72.00","16","0","1,024","5.10","6","2","1","2"',
    "==PROF== Disconnected from process 4242",
])

_DETAILS_HEAD = (_ID + ',"Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type",'
                 '"Rule Description","Estimated Speedup Type","Estimated Speedup"')
_ROW0 = '"0","4242","python3.12","127.0.0.1","row_stats_kernel","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0"'
_ROW1 = '"1","4242","python3.12","127.0.0.1","normalise_kernel","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0"'
DETAILS = "\n".join([
    _DETAILS_HEAD,
    _ROW0 + ',"GPU Speed Of Light Throughput","Duration","ns","12,288",',
    _ROW0 + ',"SpeedOfLight","","","","SOLBottleneck","INF","Memory is more heavily utilized than Compute.","",""',
    _ROW0 + ',"Occupancy","Achieved Occupancy","%","70.00",',
    _ROW0 + ',"Occupancy","","","","AchievedOccupancy","OPT","The difference between calculated theoretical (100.0%) and '
    'measured achieved occupancy (70.0%) can be the result of warp scheduling overheads. See the guide.","local","30"',
    _ROW0 + ',"LaunchStats","","","","LaunchConfiguration","OPT","A wave of thread blocks is defined as the maximum number.",'
    '"global","12.5"',
    _ROW1 + ',"GPU Speed Of Light Throughput","Duration","ns","20,480",',
    _ROW1 + ',"WarpStateStats","","","","CPIStall","WRN","On average, each warp of this kernel spends 3.0 cycles being '
    'stalled waiting for a scoreboard dependency.","global","41.7"',
])


def test_csv_rows_skip_ncu_and_program_output_around_the_table():
    rows = csv_rows(RAW)
    assert [r["ID"] for r in rows] == ["", "0", "1", "2"]
    with pytest.raises(NcuParseError):
        csv_rows("==PROF== nothing here\n")


def test_raw_page_reads_units_row_and_thousands_separators():
    launches = parse_raw(RAW)
    assert [l.kernel for l in launches] == ["row_stats_kernel", "normalise_kernel", "row_stats_kernel"]
    assert launches[0].value("gpu__time_duration.sum") == 12288.0
    assert launches[0].unit("gpu__time_duration.sum") == "ns"
    assert launches[0].value("launch__shared_mem_per_block_dynamic") == 1024.0


def test_launches_of_one_kernel_fold_into_one_profile_and_kernels_stay_apart():
    kernels = summarise_launches(merge(parse_raw(RAW), parse_details(DETAILS)))
    stats, norm = kernels
    assert (stats.name, stats.launches, norm.name, norm.launches) == ("row_stats_kernel", 2, "normalise_kernel", 1)
    assert stats.duration_us == pytest.approx(2 * 12.288)  # ns → µs, summed over launches
    assert stats.dram_pct == pytest.approx(82.5)  # duration-weighted mean of 81.5 and 83.5
    assert (stats.registers, stats.shared_bytes, stats.l2_hit_pct) == (16, 1024, pytest.approx(4.1))
    assert (norm.registers, norm.shared_bytes, norm.occupancy_pct) == (18, 0, 80.0)
    assert (stats.block, stats.grid) == ("(256, 1, 1)", "(4096, 1, 1)")


def test_stalls_are_shares_of_all_stall_reasons_without_selected():
    (launch, *_) = parse_raw(RAW)
    assert stalls_of(launch) == [("long_scoreboard", 60.0), ("barrier", 20.0), ("wait", 20.0)]


def test_findings_keep_optimisation_hints_with_the_biggest_estimated_win_first():
    stats, norm = summarise_launches(merge(parse_raw(RAW), parse_details(DETAILS)))
    assert [f["rule"] for f in stats.findings] == ["AchievedOccupancy", "LaunchConfiguration"]  # INF without speedup dropped
    assert stats.findings[0]["est_speedup_pct"] == 30.0 and stats.findings[0]["type"] == "OPT"
    assert norm.findings[0]["rule"] == "CPIStall" and norm.findings[0]["est_speedup_pct"] == pytest.approx(41.7)


def test_details_page_alone_gives_the_figures_it_has():
    kernels = summarise_launches(parse_details(DETAILS))
    assert kernels[0].duration_us == pytest.approx(12.288) and kernels[0].occupancy_pct == 70.0
    assert kernels[0].dram_pct is None
    assert "DRAM throughput was not collected" in missing_notes(kernels)


def _summary(tmp_path: Path, version: int, created: float) -> NcuSummary:
    kernels = summarise_launches(merge(parse_raw(RAW), parse_details(DETAILS)))
    return NcuSummary(kernel="softmax_twopass", version=version, content_hash="abc", shape={"rows": 4096, "cols": 4096},
                      set="basic", device="NVIDIA H200", created=created,
                      report_path=str(tmp_path / "profile.ncu-rep"), kernels=kernels,
                      total_duration_us=sum(k.duration_us for k in kernels))


def test_summary_round_trips_through_ncu_json_and_latest_is_the_newest(tmp_path):
    state = tmp_path / ".ktui"
    old, new = _summary(tmp_path, 1, 100.0), _summary(tmp_path, 2, 200.0)
    for s in (old, new):
        run_dir = state / "runs" / "softmax_twopass" / str(s.version)
        run_dir.mkdir(parents=True)
        write(run_dir, s)
    back = load(state / "runs" / "softmax_twopass" / "1")
    assert back == old
    assert isinstance(back.kernels[0], KernelProfile) and back.kernels[0].stalls[0] == ("long_scoreboard", 60.0)
    assert latest(state, "softmax_twopass").version == 2
    assert load(state / "runs" / "softmax_twopass" / "9") is None and latest(state, "other") is None
    text = (state / "runs" / "softmax_twopass" / "2" / "ncu.txt").read_text()
    assert "row_stats_kernel ×2" in text and "normalise_kernel ×1" in text and "stalls: long_scoreboard 60%" in text
    assert json.loads((state / "runs" / "softmax_twopass" / "2" / "ncu.json").read_text())["total_duration_us"] > 0


# -- recorded on the H200 (tests/fixtures/gpu, made by tests/benchmarks/record_gpu_fixtures.sh) ----


def _fixture(name: str) -> str:
    path = GPU_FIXTURES / name
    if not path.is_file():
        pytest.skip(f"recorded fixture {path.name} not checked in yet (run tests/benchmarks/record_gpu_fixtures.sh on the H200)")
    return path.read_text()


def test_recorded_softmax_profile_parses_into_one_kernel_with_every_figure():
    launches = merge(parse_raw(_fixture("ncu_softmax_raw.csv")), parse_details(_fixture("ncu_softmax_details.csv")))
    (k,) = summarise_launches(launches)
    assert k.name == "softmax_kernel" and k.launches == 1 and k.duration_us > 0
    for value in (k.dram_pct, k.sm_pct, k.occupancy_pct, k.l2_hit_pct):
        assert value is not None and 0 <= value <= 100
    assert k.registers and k.registers > 0 and k.shared_bytes is not None
    assert k.stalls and abs(sum(p for _, p in stalls_of(launches[0])) - 100) < 1e-6


def test_recorded_two_kernel_profile_gives_both_kernels_and_their_total():
    launches = merge(parse_raw(_fixture("ncu_twopass_raw.csv")), parse_details(_fixture("ncu_twopass_details.csv")))
    kernels = summarise_launches(launches)
    assert [k.name for k in kernels] == ["row_stats_kernel", "normalise_kernel"]
    assert all(k.duration_us > 0 for k in kernels)


def test_recorded_profile_json_is_the_contract_the_dashboard_reads():
    lines = [json.loads(line) for line in _fixture("profile_softmax.jsonl").splitlines() if line.strip()]
    assert lines[-1]["type"] == "profile_finished" and lines[-1]["ok"] is True
    assert all(line["type"] == "profile_progress" for line in lines[:-1])
    summary = NcuSummary.from_json(lines[-1]["summary"])
    assert summary.kernels[0].name == "softmax_kernel" and summary.total_duration_us > 0
