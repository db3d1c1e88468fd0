"""Versions compared on the same per-shape figures: fraction of the attainable time, bound, stop decision.

The summaries are those ``ktui.worker.ladder.summarize`` writes, with add_triton's H200 fractions
(issue 29: 3.81, 14.3, 183.8 µs against a 3.5 µs launch floor, the max model; see
tests/measure/test_launch_floor.py) for v2, and a slower made-up v1 to compare it with.
"""

import pytest

from ktui.history import rooflines
from ktui.history.store import Store
from ktui.protocol.events import RunFinished, RunStarted

pytestmark = pytest.mark.unit


def summary(fractions: dict[str, tuple[float, str]], done: float = 0.9) -> dict:
    shapes = {shape: {"roofline": f, "bound": bound} for shape, (f, bound) in fractions.items()}
    worst = min(shapes, key=lambda s: shapes[s]["roofline"])
    short = [s for s, v in shapes.items() if v["roofline"] < done]
    return {"roofline_shapes": shapes, "roofline_worst": {"shape": worst, **shapes[worst]}, "roofline_done": done,
            "satisfied": not short, "short": short}


V1 = summary({"size=65536": (0.70, "launch-bound"), "size=4194304": (0.62, "memory-bound"),
              "size=67108864": (0.95, "memory-bound")})
V2 = summary({"size=65536": (0.919, "launch-bound"), "size=4194304": (0.806, "memory-bound"),
              "size=67108864": (1.004, "memory-bound")})


def test_two_versions_are_compared_shape_by_shape():
    rows = rooflines.compare(V1, V2)
    assert [r["shape"] for r in rows] == ["size=65536", "size=4194304", "size=67108864"]
    assert rows[1] == {"shape": "size=4194304", "base": 0.62, "new": 0.806, "bound": "memory-bound",
                       "change_points": 18.6}


def test_the_comparison_reads_one_shape_a_line_with_the_stop_decision():
    assert rooflines.lines(1, V1, 2, V2) == [
        "attainable per shape, v2 against v1:",
        "  size=65536       92% (v1 70%, +22 points)  launch-bound",
        "  size=4194304     81% (v1 62%, +19 points)  memory-bound",
        "  size=67108864   100% (v1 95%, +5 points)  memory-bound",
        "  v2 not satisfied: size=4194304 short of 90%",
    ]


def test_a_version_recorded_before_per_shape_figures_is_said_to_have_none_not_compared_on_a_mean():
    old = {"speedup": 5.45, "roofline": 0.31, "at_roofline": False}
    rows = rooflines.compare(old, V2)
    assert all(r["base"] is None and r["change_points"] is None for r in rows)
    assert rooflines.lines(1, old, 2, V2)[1] == "  size=65536       92% (v1 —)  launch-bound"
    assert rooflines.lines(1, old, 2, old) == [
        "attainable per shape: no per-shape roofline figures (not benchmarked on a GPU, or recorded before them) "
        "in v1 or v2"]


def record(store: Store, run_id: str, version: int, verdict: str, summary_: dict, started: float) -> None:
    store.record(RunStarted(run_id, kernel="add_triton", path="/w/kernels/add_triton.py", version=version,
                            content_hash=f"h{version}", reference="/w/references/add.py", reference_hash="rh",
                            tier="gpu", device="NVIDIA H200", arch="sm_90a", run_dir=f"/w/.ktui/runs/add_triton/{version}",
                            time=started))
    store.record(RunFinished(run_id, verdict=verdict, summary=summary_, duration_s=3.0, time=started + 3))


def test_a_version_s_figures_come_from_its_newest_run_that_has_them(tmp_path):
    store = Store(tmp_path / "history.db")
    record(store, "a", 2, "passed", V2, 100.0)
    record(store, "b", 2, "passed", {"correct": [5, 5]}, 200.0)  # a later --no-bench run of the same version
    record(store, "c", 2, "cancelled", {}, 300.0)
    assert rooflines.version_summary(store, "add_triton", 2) == V2
    assert rooflines.version_summary(store, "add_triton", 9) is None
