"""The ``fresh-shapes`` rung: a kernel right on exactly the TESTS sizes fails on shapes it was never
shown; an honest one passes; a reference or a flag can turn the rung off (CPU tier, Triton's
interpreter). One ``ktui run --json --fresh-shapes 3`` covers the kernels; a second runs with
``--no-fresh-shapes``."""

from __future__ import annotations

import pytest
from conftest import FIXTURES, by_kernel, finished, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker

# Each kernel against other references: derived shapes, the reference's own list, turned off.
AGAINST = {"double_tuned_own": ("double_tuned", "double_own"), "double_tuned_off": ("double_tuned", "double_off"),
           "double_honest_own": ("double_honest", "double_own")}


def _workspace(root):
    make_workspace(root, fixtures=["double_tuned", "double_honest"])
    for name, (kernel, reference) in AGAINST.items():
        text = (FIXTURES / "kernels" / f"{kernel}.py").read_text()
        (root / "kernels" / f"{name}.py").write_text(text.replace('REFERENCE = "double"', f'REFERENCE = "{reference}"'))
    return root


@pytest.fixture(scope="module")
def stream(tmp_path_factory, warm_ktui):
    root = _workspace(tmp_path_factory.mktemp("fresh"))
    proc = warm_ktui("run", "--no-audit", "--json", "--seed", "11", "--fresh-shapes", "3", "kernels/", cwd=root)
    return proc, by_kernel(parse_events(proc.stdout))


def test_a_kernel_tuned_on_the_test_sizes_fails_on_a_shape_it_was_never_shown(stream):
    events = stream[1]["double_tuned"]
    r = rungs(events)
    assert all(v["status"] == "ok" for k, v in r.items() if k.startswith("correctness["))
    assert finished(events)["summary"]["correct"] == [3, 3]
    fresh = r["fresh-shapes"]
    assert fresh["status"] == "failed"
    assert fresh["message"].startswith("wrong on a shape it was never shown: size=")
    assert "never written" in fresh["message"]  # the tail past its 1024-wide block
    tried = fresh["figures"]["shapes"]
    assert tried and all(2000 <= int(label.split("=")[1]) <= 3001 for label in tried)
    assert finished(events)["verdict"] == "failed"
    assert finished(events)["summary"]["first_failure"]["rung"] == "fresh-shapes"


def test_an_honest_kernel_passes_on_as_many_shapes_as_asked_and_they_are_named(stream):
    events = stream[1]["double_honest"]
    fresh = rungs(events)["fresh-shapes"]
    assert fresh["status"] == "ok", fresh
    tried = fresh["figures"]["shapes"]
    assert len(tried) == 3 and not {"size=2000", "size=3001", "size=5000"} & set(tried)
    assert fresh["message"] == f"right on 3 shape(s) it was never shown: {'; '.join(tried)}"
    assert finished(events)["verdict"] == "passed"


def test_the_references_own_fresh_shapes_are_used_in_their_order(stream):
    fresh = rungs(stream[1]["double_tuned_own"])["fresh-shapes"]
    assert fresh["status"] == "failed"
    assert fresh["message"].startswith("wrong on a shape it was never shown: size=2500: ")
    # the order is kept: size=2500 is tried first, so the run fails before size=-3 is screened
    assert fresh["figures"]["shapes"] == ["size=2500"]


def test_a_reference_with_fresh_shapes_false_skips_the_rung(stream):
    events = stream[1]["double_tuned_off"]
    fresh = rungs(events)["fresh-shapes"]
    assert fresh["status"] == "skipped"
    assert fresh["message"] == "turned off by the reference (double_off.py: FRESH_SHAPES)"
    assert finished(events)["verdict"] == "passed"


def test_the_fresh_shapes_rung_comes_after_the_correctness_rungs_and_before_the_probes(stream):
    order = [e["rung"] for e in stream[1]["double_honest"] if e["type"] == "rung_finished"]
    at = order.index("fresh-shapes")
    assert all(i < at for i, name in enumerate(order) if name.startswith("correctness["))
    assert at < order.index("integrity") < order.index("dependence")


def test_no_fresh_shapes_flag_turns_the_rung_off(tmp_path, warm_ktui):
    root = _workspace(tmp_path / "ws")
    proc = warm_ktui("run", "--no-audit", "--json", "--no-fresh-shapes", "kernels/double_tuned.py", cwd=root)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-2000:]
    fresh = rungs(events)["fresh-shapes"]
    assert fresh["status"] == "skipped" and fresh["message"] == "turned off (--no-fresh-shapes)"


def test_a_fresh_shape_the_reference_rejects_is_skipped_by_name(stream):
    fresh = rungs(stream[1]["double_honest_own"])["fresh-shapes"]
    assert fresh["status"] == "ok", fresh
    assert fresh["figures"] == {"shapes": ["size=2500"], "skipped": ["size=-3"]}
    assert "; skipped (the reference rejects them): size=-3 (generate_input(" in fresh["message"]
    assert "size must be positive, got -3" in fresh["message"]
