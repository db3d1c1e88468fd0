"""A shape whose every value is below the noise floor carries no signal: an erf GELU where float32's
erf saturates returns 0 against the float64 reference's -7e-9. It passes on its elementwise check,
never on a coin flip of the cosine gate, and says that a zero kernel would pass it too."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.cli.exits import EXIT_UNTRUSTED
from ktui.protocol.lines import rung_line, summary_line

pytestmark = pytest.mark.worker

NOISE = Path(__file__).resolve().parent.parent / "fixtures" / "noise"


def test_a_gelu_whose_outputs_are_all_below_the_noise_floor_passes_with_a_no_signal_notice(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    shutil.copy(NOISE / "gelu_erf.py", ws / "kernels" / "gelu_erf.py")
    shutil.copy(NOISE / "gelu_saturated.py", ws / "references" / "gelu_saturated.py")
    for seed in ("0", "1"):  # --strict: three fresh inputs per shape, six draws per seed
        proc = ktui("run", "--no-audit", "kernels/gelu_erf.py", "--cpu", "--json", "--strict", "--seed", seed, cwd=ws)
        events = by_kernel(parse_events(proc.stdout))["gelu_erf"]
        checks = {name: r for name, r in rungs(events).items() if name.startswith("correctness[")}
        assert len(checks) == 3, proc.stderr
        for name, r in checks.items():
            assert r["status"] == "ok", f"seed {seed}, {name}: {r['message']}"
            assert r["figures"]["no_signal"] is True and r["figures"]["noise_floor"] == 1e-5
            assert "below the noise floor: a zero kernel would pass it" in r["message"]
            assert "no_signal=yes" in rung_line(r)
        end = finished(events)
        assert end["verdict"] == "passed", end
        assert end["summary"]["no_signal"] == list(checks)
        line = summary_line("gelu_erf", 1, end["verdict"], end["summary"], "cpu", "", 1.0)
        assert "NOT TRUSTED: no signal on every shape" in line, line
        assert end["summary"]["trusted"] is False
        assert proc.returncode == EXIT_UNTRUSTED  # --strict: a pass that proved nothing is not the final word
