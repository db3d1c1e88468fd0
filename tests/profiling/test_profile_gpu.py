"""On a GPU machine (``pytest -m gpu``): ``ktui profile``, ``--sections`` and ``ktui sanitize`` for real."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import ktui, make_workspace, parse_events

from ktui.history.store import Store
from ktui.profiling import ncu

pytestmark = [pytest.mark.gpu, pytest.mark.slow, pytest.mark.worker]


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA driver on this machine")
    root = make_workspace(tmp_path_factory.mktemp("gpu"), kernels=["softmax_triton", "add_triton"],
                          fixtures=["softmax_twopass", "softmax_sections", "oob_read"])
    proc = ktui("run", "--no-audit", "--no-bench", "--seed", "1", "kernels/", cwd=root)
    assert "gpu" in proc.stdout, proc.stdout + proc.stderr
    return root


def _profile(root: Path, *args: str) -> dict:
    proc = ktui("profile", *args, "--json", cwd=root, timeout=900)
    lines = parse_events(proc.stdout)
    assert lines and all(l["type"] == "profile_progress" for l in lines[:-1])
    last = lines[-1]
    assert last["type"] == "profile_finished"
    assert last["ok"] is True and proc.returncode == 0, last["message"] + proc.stderr
    return last


def test_profile_of_the_shipped_softmax_gives_every_figure_and_keeps_its_files(ws):
    last = _profile(ws, "kernels/softmax_triton.py")
    summary = ncu.NcuSummary.from_json(last["summary"])
    (k,) = summary.kernels
    assert k.name == "softmax_kernel" and k.launches == 1 and k.duration_us > 0
    assert summary.total_duration_us == pytest.approx(k.duration_us)
    for value in (k.dram_pct, k.sm_pct, k.occupancy_pct, k.l2_hit_pct):
        assert value is not None and 0 <= value <= 100
    assert k.stalls, "warp-stall reasons must be collected by the default set"
    run_dir = ws / ".ktui" / "runs" / "softmax_triton" / str(summary.version)
    resources = json.loads((run_dir / "resources.json").read_text())
    assert k.registers == resources["softmax_kernel"]["registers"]  # ncu and cuobjdump agree
    for name in ("profile.ncu-rep", "ncu.json", "ncu.txt"):
        assert (run_dir / name).stat().st_size > 0, name
    assert ncu.load(run_dir) == summary and ncu.latest(ws / ".ktui", "softmax_triton") == summary
    (row,) = Store(ws / ".ktui" / "history.db").profiles("softmax_triton", kind="ncu")
    assert row["version"] == summary.version and row["report_path"].endswith("profile.ncu-rep")


def test_profile_of_a_two_kernel_softmax_reports_each_kernel_and_the_total(ws):
    summary = ncu.NcuSummary.from_json(_profile(ws, "kernels/softmax_twopass.py")["summary"])
    assert [k.name for k in summary.kernels] == ["row_stats_kernel", "normalise_kernel"]
    assert summary.total_duration_us == pytest.approx(sum(k.duration_us for k in summary.kernels), rel=1e-6)


def test_profile_with_the_full_set_brings_ncu_findings(ws):
    summary = ncu.NcuSummary.from_json(_profile(ws, "kernels/add_triton.py", "--set", "full")["summary"])
    assert summary.set == "full" and summary.kernels[0].l2_hit_pct is not None
    assert all({"rule", "message", "est_speedup_pct"} <= set(f) for f in summary.kernels[0].findings)


def test_the_ncu_report_module_and_the_csv_export_agree(ws):
    from ktui.profiling.profile import find_ncu, ncu_report_module

    tool = find_ncu()
    module = ncu_report_module(tool)
    if module is None:
        pytest.skip("the ncu_report module is not shipped with this ncu")
    report = ws / ".ktui" / "runs" / "softmax_triton" / "1" / "profile.ncu-rep"
    if not report.is_file():
        _profile(ws, "kernels/softmax_triton.py")
    from ktui.profiling.profile import export_csv

    via_module = ncu.summarise_launches(ncu.launches_from_report(module, report))
    via_csv = ncu.summarise_launches(ncu.parse_raw(export_csv(tool, report, "raw")))
    assert [k.name for k in via_module] == [k.name for k in via_csv]
    assert via_module[0].duration_us == pytest.approx(via_csv[0].duration_us, rel=1e-3)
    assert via_module[0].registers == via_csv[0].registers


def test_sections_time_the_proton_scopes_of_a_triton_kernel(ws):
    last = _profile(ws, "kernels/softmax_sections.py", "--sections")
    sections = last["sections"]["sections"]
    assert {s["path"][0] for s in sections} >= {"load", "reduce", "store"}
    top = [s for s in sections if len(s["path"]) == 1]
    assert sum(s["share_pct"] for s in top) == pytest.approx(100, abs=0.5)


def test_sanitize_finds_nothing_in_the_shipped_softmax(ws):
    proc = ktui("sanitize", "kernels/softmax_triton.py", "--json", cwd=ws, timeout=900)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["ok"] is True, out["message"]


def test_sanitize_names_the_kernel_that_reads_out_of_bounds(ws):
    proc = ktui("sanitize", "kernels/oob_read.py", "--json", cwd=ws, timeout=900)
    out = json.loads(proc.stdout)
    assert proc.returncode == 1 and out["ok"] is False
    first = out["report"]["errors"][0]
    assert first["kernel"] == "add_kernel" and "read" in first["message"].lower()
