"""The compile speed-ups change no verdict, on a GPU: a version of the TileLang softmax whose other
shapes four compile-ahead helpers built (into ktui's build cache, which the worker's compiles then
reuse) is judged as the same version run with no helper and the cache off: the same rungs,
statuses, verdict and correctness figures, time figures left out (``--seed 0`` both times)."""

from __future__ import annotations

import os
import time

import pytest
from conftest import ktui, make_workspace, parse_events
from headless import Headless
from judged import what_was_judged
from leftovers import tagged

pytestmark = [pytest.mark.gpu, pytest.mark.worker]
BODY = "T.exp2((x[i, j] - top[i]) * LOG2E)"


def test_a_tilelang_version_built_by_the_helpers_is_judged_as_one_built_by_the_worker_alone(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("tilelang")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    monkeypatch.setenv("KTUI_USER_DIR", str(tmp_path / "user"))
    monkeypatch.setenv("KTUI_COMPILE_AHEAD", "4")
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_tilelang"])
    kernel = ws / "kernels" / "softmax_tilelang.py"
    source = kernel.read_text()
    assert BODY in source
    watch = Headless(ws, "--no-bench")
    try:
        start = len(watch.seen)
        watch.until(lambda e: e.get("type") == "run_finished")
        deadline = time.monotonic() + 300
        version = 0
        while True:  # until a run is handed to all four helpers: the session's steady state
            version += 1
            text = source.replace(BODY, f"T.exp2((x[i, j] - top[i]) * LOG2E + {version / 1024!r})")
            tmp = kernel.with_name(".softmax_tilelang.py.tmp")
            tmp.write_text(text)
            os.replace(tmp, kernel)
            start = len(watch.seen)
            watch.until(lambda e: e.get("type") == "run_finished")
            run = watch.seen[start:]
            compiled = next(e for e in run if e.get("type") == "rung_finished" and e["rung"] == "compile")
            handed = compiled["figures"].get("compiling_ahead") or {}
            if handed.get("helpers") == 4:
                break
            assert time.monotonic() < deadline, f"no run was handed to all four compile-ahead helpers (last: {handed})"
            time.sleep(2)
        assert handed["shapes"] >= 5  # the other test shapes and the fresh ones
        ahead = what_was_judged(run)
    finally:
        assert watch.stop() in (0, 130)
    deadline = time.monotonic() + 10
    while tagged("KTUI_TEST_TAG", watch.tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not tagged("KTUI_TEST_TAG", watch.tag), "a worker or a compile-ahead helper outlived the watch"
    alone = what_was_judged(parse_events(ktui("run", "--no-audit", "--no-bench", "--json", "--seed", "0", "kernels/",
                                              cwd=ws, env={"KTUI_NO_BUILD_CACHE": "1", "KTUI_COMPILE_AHEAD": "0"}).stdout))
    assert ahead["softmax_tilelang"]["verdict"] == "passed", ahead
    assert ahead == alone
