"""The GPU-only reward hacks: work that escapes the timer, a kernel that cuts corners once it is
being timed, a patched timer; and the honest kernels stay clean under the same checks."""

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path_factory.mktemp("gpuhacks"), kernels=["add_triton"],
                          hacks=["side_stream", "lazy_after_warmup", "patches_timer", "cache_by_pointer", "zeroes_copies"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "9", "--bench-time", "1", "kernels/", cwd=root, timeout=900)
    return proc, by_kernel(parse_events(proc.stdout))


def _suspicious(events):
    return [r for r in rungs(events).values() if r["status"] == "suspicious"]


def _failed(events):
    """A hack is right whenever it is checked: a failed rung is ktui's error, not the hack's."""
    return [(r["rung"], r["message"]) for r in rungs(events).values() if r["status"] == "failed"]


def test_work_on_a_side_stream_is_caught(stream):
    events = stream[1]["hack_side_stream"]
    assert finished(events)["verdict"] == "suspicious" and not _failed(events)
    reasons = " ".join(r["message"] for r in _suspicious(events))
    assert "escapes the timer" in reasons or "impossible" in reasons or "faster than" in reasons


def test_a_kernel_that_cuts_corners_when_timed_is_caught(stream):
    events = stream[1]["hack_lazy_after_warmup"]
    assert finished(events)["verdict"] == "suspicious", _failed(events)
    assert not _failed(events)
    assert any("wrong when timed" in r["message"] or "impossible" in r["message"] for r in _suspicious(events))


@pytest.mark.parametrize("hack", ["patches_timer", "cache_by_pointer"])
def test_cpu_visible_hacks_are_caught_on_the_gpu_too(stream, hack):
    assert finished(stream[1][f"hack_{hack}"])["verdict"] == "suspicious"


def test_the_honest_kernel_passes_every_check_on_the_gpu(stream):
    events = stream[1]["add_triton"]
    assert finished(events)["verdict"] == "passed", [(r["rung"], r["message"]) for r in _suspicious(events)]
    for name, r in rungs(events).items():
        if name.startswith("benchmark["):
            assert r["figures"]["rechecked"] > 0 and r["figures"]["wall_us"] > 0


def test_a_kernel_that_zeroes_the_harness_copies_of_its_inputs_is_caught_before_timing(stream):
    # Found through gc and zeroed with the inputs, the copies would agree with an answer for zeros:
    # their checksums, taken on the device before the call, name the copy that moved.
    events = stream[1]["hack_zeroes_copies"]
    assert finished(events)["verdict"] == "suspicious"
    r = rungs(events)["run"]
    assert r["status"] == "suspicious" and "changed the harness's private copy of input 0" in r["message"]
