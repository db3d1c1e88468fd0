"""First contact on a real GPU: a fresh per-user folder (nothing calibrated), a fresh workspace, and
``ktui run kernels/add_triton.py``. The first benchmark calibrates the GPU (its progress told as the
rung's notes, its time apart in ``calibration_s``), keeps it for the user, and the small add reads
launch-bound and ``satisfied``; a second workspace reuses the calibration without measuring.

Run on a CUDA machine with ``python3 -m pytest -m gpu tests/worker/test_first_contact_gpu.py -s``.
"""

import pytest
import torch
from conftest import finished, ktui, make_workspace, parse_events, rungs

from ktui.protocol.lines import summary_line

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.timing,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.worker,
]

H200_LIMIT_S = 20.0  # issue 45: the one-time calibration takes at most this on an H200


def run_add(root, user):
    proc = ktui("run", "--no-audit", "--json", "kernels/add_triton.py", cwd=root, env={"KTUI_USER_DIR": str(user)})
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return events, finished(events)["summary"]


def test_a_fresh_machine_calibrates_on_the_first_benchmark_and_the_small_add_is_satisfied(tmp_path):
    user = tmp_path / "user"
    events, summary = run_add(make_workspace(tmp_path / "ws", kernels=["add_triton"]), user)
    print("\n" + summary_line("add_triton", 1, "passed", summary, "gpu", "", 0.0))
    small = rungs(events)["benchmark[size=65536]"]["figures"]
    assert small["bound"] == "launch-bound" and small["launch_floor_us"] > 0, small
    assert summary["satisfied"] is True and "roofline_provisional" not in summary, summary
    notes = [e for e in events if e["type"] == "rung_started" and e.get("note")]
    assert notes and notes[0]["rung"] == "benchmark[size=65536]" and "calibrating the GPU" in notes[0]["note"]
    assert small["calibration_s"] == summary["calibration_s"] > 0
    if "H200" in torch.cuda.get_device_name():
        assert summary["calibration_s"] <= H200_LIMIT_S
    kept = list((user / "calibration").glob("*.json"))
    assert len(kept) == 1 and small["calibration"] == str(kept[0])
    assert not (tmp_path / "ws" / ".ktui" / "calibration.json").exists()

    again_events, again = run_add(make_workspace(tmp_path / "second", kernels=["add_triton"]), user)
    assert "calibration_s" not in again and again["satisfied"] is True
    assert not [e for e in again_events if e["type"] == "rung_started" and e.get("note")]
