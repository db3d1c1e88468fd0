"""The watch loop audits each reference version once, in the background: real workspaces, real
worker and audit processes (CPU tier), the headless watcher as an agent reads it."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import FIXTURES
from headless import Headless
from leftovers import tagged

from ktui.protocol.events import RunFinished, RunStarted
from ktui.protocol.job import Options
from ktui.protocol.notices import AuditFinished, QueueChanged
from ktui.watch.loop import WatchLoop, WatchSettings
from ktui.workspace.folder import Workspace

pytestmark = pytest.mark.worker

AUDIT = FIXTURES / "audit"
COPY = (AUDIT / "relu_copy_triton.py").read_text()


def relu_workspace(root: Path, reference: str = "relu_rand") -> Path:
    """``references/<reference>.py`` (ReLU on rand: weak; on randn: strong) and a copy kernel judged by it."""
    (root / "references").mkdir(parents=True)
    (root / "kernels").mkdir()
    shutil.copy(AUDIT / f"{reference}.py", root / "references" / f"{reference}.py")
    (root / "kernels" / "relu_copy_triton.py").write_text(COPY.replace('REFERENCE = "relu_rand"',
                                                                       f'REFERENCE = "{reference}"'))
    return root


def test_headless_prints_the_weak_audit_after_the_run_and_a_second_start_tells_it_from_the_cache(tmp_path):
    ws = relu_workspace(tmp_path / "ws")
    first = Headless(ws)
    try:
        audit = first.until(lambda e: e["type"] == "audit_finished")
        finished = [e for e in first.seen if e["type"] == "run_finished"]
        assert finished and finished[0]["verdict"] == "passed", "the catch-up run's verdict comes before the audit"
        assert audit["verdict"] == "weak" and not audit["cached"] and audit["kernels"] == ["relu_copy_triton"]
        assert audit["reasons"][0].startswith("a kernel that returns a copy of input 0 passes on every test shape")
        assert audit["reference"] == str(ws / "references" / "relu_rand.py")
    finally:
        assert first.stop() == 0, first.proc.stderr.read()
    stored = ws / ".ktui" / "audits" / f"{audit['reference_hash']}.json"
    record = json.loads(stored.read_text())
    assert record["verdict"] == "weak"
    assert tagged("KTUI_TEST_TAG", first.tag) == []  # neither the worker nor the audit process is left

    second = Headless(ws, "--lazy")  # the run is current too: only the audit could do anything
    try:
        again = second.until(lambda e: e["type"] == "audit_finished")
        assert again["cached"] and again["verdict"] == "weak" and again["reference_hash"] == audit["reference_hash"]
    finally:
        assert second.stop() == 0, second.proc.stderr.read()
    assert not [e for e in second.seen if e["type"] == "queue" and e.get("background")], "audited again"
    assert json.loads(stored.read_text())["audited"] == record["audited"]


def test_a_strong_reference_is_audited_once_and_said_strong(tmp_path):
    ws = relu_workspace(tmp_path / "ws", reference="relu_randn")
    watch = Headless(ws)
    try:
        audit = watch.until(lambda e: e["type"] == "audit_finished")
    finally:
        assert watch.stop() == 0, watch.proc.stderr.read()
    assert audit["verdict"] == "strong" and audit["reasons"] == [] and not audit["cached"]
    summaries = [e["summary"] for e in watch.seen if e["type"] == "run_finished"]
    assert summaries and all("weak_test" not in s for s in summaries)


class Collector:
    def __init__(self):
        self.items: list = []
        self.cond = threading.Condition()

    def __call__(self, item) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify_all()

    def wait_for(self, predicate, timeout: float = 180.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not any(predicate(i) for i in self.items):
                left = deadline - time.monotonic()
                assert left > 0, f"timed out; last items: {[type(i).__name__ for i in self.items[-20:]]}"
                self.cond.wait(left)
            return next(i for i in self.items if predicate(i))


def test_a_save_during_the_audit_runs_at_once_and_the_audit_is_done_again_after_it(tmp_path):
    ws = relu_workspace(tmp_path / "ws")
    got = Collector()
    loop = WatchLoop(Workspace.at(ws), Options(seed=0), got, WatchSettings(debounce_s=0.05))
    loop.start()
    try:
        got.wait_for(lambda e: isinstance(e, QueueChanged) and e.background == "auditing relu_rand")
        kernel = ws / "kernels" / "relu_copy_triton.py"
        tmp = kernel.with_name(".relu_copy_triton.py.tmp")
        tmp.write_text(COPY + "\n# saved while the reference is audited\n")
        os.replace(tmp, kernel)
        audit = got.wait_for(lambda e: isinstance(e, AuditFinished))
        with got.cond:
            items = list(got.items)
    finally:
        loop.close()
    started = [i for i, e in enumerate(items) if isinstance(e, RunStarted) and e.version == 2]
    finished = [i for i, e in enumerate(items) if isinstance(e, RunFinished) and e.run_id == items[started[0]].run_id]
    assert started and finished, "the save ran"
    assert finished[0] < items.index(audit), "the save's verdict did not wait for the audit"
    audits_started = [i for i, e in enumerate(items) if isinstance(e, QueueChanged) and e.background]
    assert audits_started[0] < started[0] < audits_started[-1], "pre-empted, then started again after the run"
    assert audit.verdict == "weak" and not audit.cached


def test_no_audit_leaves_the_reference_unaudited_through_runs_and_saves(tmp_path):
    ws = relu_workspace(tmp_path / "ws")
    watch = Headless(ws, "--no-audit")
    try:
        watch.until(lambda e: e["type"] == "run_finished")
        kernel = ws / "kernels" / "relu_copy_triton.py"
        kernel.write_text(kernel.read_text() + "\n# saved again\n")
        watch.until(lambda e: e["type"] == "run_finished")
    finally:
        assert watch.stop() == 0, watch.proc.stderr.read()
    assert not [e for e in watch.seen if e["type"] == "audit_finished"]
    assert not [e for e in watch.seen if e["type"] == "queue" and e.get("background")]
    assert not (ws / ".ktui" / "audits").exists()
