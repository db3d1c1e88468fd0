"""Events survive their JSON form unchanged, and figures are always valid strict JSON."""

import json

import pytest

from ktui.protocol.events import (
    ArtifactWritten,
    ErrorInfo,
    Output,
    RunFinished,
    RungFinished,
    RungStarted,
    RunStarted,
    SourceLocation,
    clean_figures,
    event_from_json,
)

pytestmark = pytest.mark.unit

SAMPLES = [
    RunStarted("r1", kernel="softmax_triton", path="/w/kernels/softmax_triton.py", version=3, content_hash="ab12",
               reference="/w/references/softmax.py", reference_hash="cd34", tier="cpu",
               device="CPU (Triton interpreter)", arch="sm_90a", run_dir="/w/.ktui/runs/softmax_triton/3"),
    RungStarted("r1", rung="correctness[rows=4]", timeout_s=60.0),
    RungFinished("r1", rung="correctness[rows=4]", status="failed", figures={"psnr": 12.5, "worst_index": [1, 2]},
                 message="PSNR 12.5 dB < 36 dB",
                 error=ErrorInfo(type="KeyError", message="'y'", traceback="...",
                                 location=SourceLocation(file="/w/k.py", line=4, col=2, excerpt=">4 | x", first_line=1))),
    ArtifactWritten("r1", kind="ptx", path="/w/.ktui/runs/x/1/k.ptx", function="k", bytes=120),
    Output("r1", text="hello"),
    RunFinished("r1", verdict="failed", message="", summary={"correct": [3, 4]}, duration_s=1.5),
]


def test_every_event_round_trips_through_json():
    for event in SAMPLES:
        text = event.dumps()
        back = event_from_json(json.loads(text))
        assert back == event, type(event).__name__


def test_every_event_json_has_a_type_and_run_id():
    for event in SAMPLES:
        data = json.loads(event.dumps())
        assert data["type"] == event.type and data["run_id"] == "r1" and "time" in data


def test_non_finite_figures_become_strings_so_the_json_stays_strict():
    figures = clean_figures({"psnr": float("inf"), "cossim": float("nan"), "nested": {"a": float("-inf")}})
    assert figures == {"psnr": "inf", "cossim": "nan", "nested": {"a": "-inf"}}
    json.dumps(figures, allow_nan=False)
