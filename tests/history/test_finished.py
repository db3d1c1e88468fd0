"""Each version's finished runs, the newest first: the one reading of the history every pane,
``ktui diff --base`` and the roofline comparison make of it."""

from __future__ import annotations

import pytest
from test_rooflines import record

from ktui.history.best import newest_per_version
from ktui.history.finished import finished_by_version
from ktui.history.store import Store
from ktui.protocol.events import RunStarted

pytestmark = pytest.mark.unit


def test_a_version_is_its_newest_finished_run_whatever_came_after_it_unfinished(tmp_path):
    store = Store(tmp_path / "history.db")
    record(store, "v1-failed", 1, "failed", {}, 100.0)
    record(store, "v1-passed", 1, "passed", {}, 200.0)
    record(store, "v1-cancelled", 1, "cancelled", {}, 300.0)
    record(store, "v1-interrupted", 1, "interrupted", {}, 400.0)
    record(store, "v2-suspicious", 2, "suspicious", {}, 500.0)
    store.record(RunStarted("v2-running", kernel="add_triton", path="/k.py", version=2, content_hash="h2",
                            reference="/r.py", reference_hash="rh", tier="cpu", device="CPU", arch="sm_90a",
                            run_dir="/d", time=600.0))
    runs = store.runs("add_triton")
    assert {v: r.run_id for v, r in newest_per_version(runs).items()} == {1: "v1-passed", 2: "v2-suspicious"}
    assert {v: [r.run_id for r in rs] for v, rs in finished_by_version(runs).items()} == {
        1: ["v1-passed", "v1-failed"], 2: ["v2-suspicious"]}
    store.close()
