"""The compile speed-ups change no verdict: the shipped softmax of each DSL, run on the CPU tier with
the same seed, with ktui's build cache off (``KTUI_NO_BUILD_CACHE=1``), then on and empty, then on
and holding the builds of the run before, gives the same rungs, statuses, verdict and correctness
figures, time figures left out. (Compile-ahead helpers run only in a session on a GPU:
``test_speedups_keep_verdicts_gpu.py``.)"""

from __future__ import annotations

import pytest
from conftest import by_kernel, ktui, make_workspace, parse_events
from judged import what_was_judged

pytestmark = pytest.mark.worker

KERNELS = ["softmax_triton", "softmax_cutedsl", "softmax_tilelang"]


def test_the_softmax_of_each_dsl_is_judged_the_same_with_the_build_cache_off_cold_and_warm(tmp_path, monkeypatch):
    pytest.importorskip("tilelang", reason="tilelang not installed (pip install 'ktui[tilelang]')")
    monkeypatch.setenv("KTUI_USER_DIR", str(tmp_path / "user"))
    ws = make_workspace(tmp_path / "ws", kernels=KERNELS)

    def judged(**env: str) -> tuple[dict, list[dict]]:
        proc = ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", "--seed", "11", "kernels/", cwd=ws, env=env)
        events = parse_events(proc.stdout)
        return what_was_judged(events), events

    without, _ = judged(KTUI_NO_BUILD_CACHE="1")
    cold, _ = judged()
    warm, events = judged()
    assert sorted(without) == sorted(KERNELS)
    assert {k: v["verdict"] for k, v in without.items()} == {
        "softmax_triton": "passed", "softmax_cutedsl": "compiled", "softmax_tilelang": "compiled"}
    assert without["softmax_triton"]["checks"], "the Triton softmax's checks ran: their figures are compared"
    assert cold == without
    assert warm == without
    compile_rung = next(e for e in by_kernel(events)["softmax_tilelang"]
                        if e["type"] == "rung_finished" and e["rung"] == "compile")
    assert compile_rung["figures"]["reused"] == ["main_kernel"]  # the warm run did take the speed-up
