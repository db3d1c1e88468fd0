"""An agent saves its next version the moment it reads a verdict: every such save runs, however
many in a row, even unconfined (where the watcher does watch for a kernel that rewrites its files)."""

from __future__ import annotations

import os
import uuid

import pytest
from conftest import make_workspace
from headless import Headless

from ktui.watch.echoes import LIMIT

pytestmark = [pytest.mark.worker, pytest.mark.slow]


def test_saves_made_right_after_each_verdict_all_run_and_none_is_taken_for_the_kernels_own(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUI_NO_CONFINE", "1")  # unconfined: the case the loop-breaker exists for
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    kernel = ws / "kernels" / "add_triton.py"
    source = kernel.read_text()
    watch = Headless(ws, "--no-bench", "--cpu", "--no-fresh-shapes")
    try:
        watch.until(lambda e: e.get("type") == "run_finished")
        for version in range(LIMIT + 2):
            tmp = kernel.with_name(f".{uuid.uuid4().hex[:6]}.tmp")
            tmp.write_text(source + f"\n# version {version}\n")
            os.replace(tmp, kernel)
            finished = watch.until(lambda e: e.get("type") in ("run_finished", "reruns_stopped"), timeout=120)
            assert finished["type"] == "run_finished", finished
            assert finished["verdict"] == "passed", finished
    finally:
        watch.stop()
