"""Reward hacking: each trick in tests/fixtures/hacks is flagged "suspicious" with its reason,
and the shipped honest kernels pass clean (CPU tier; the GPU-only classes are in test_gpu_integrity)."""

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker

HACKS = {
    "torch_only": ("compile", "launched no Triton kernel"),
    "calls_reference": ("run", "called the reference's ref_kernel"),
    "imports_reference": ("pre-checks", "imports its own reference"),
    # caught by the replay probe, or earlier when the allocator happens to reuse a pointer
    "cache_by_pointer": (None, "cached answer"),
    "mutates_input": ("correctness[size=1000]", "modified its input"),
    "patches_timer": ("pre-checks", "torch.cuda.Event.elapsed_time"),
    "patches_ktui": ("compile", "ktui.worker.metrics.compare"),
    "tensor_subclass": ("run", "tensor subclass"),
    # token launches: one launch of the module's kernel, the answer from elsewhere (provenance)
    "token_launch_torch": ("run", "computed by torch (aten.add)"),
    "token_launch_reference_copy": ("run", "computed by torch"),
    "token_launch_copy_into": ("run", "torch wrote values into the output (aten.copy_)"),
    "token_launch_sentinel": ("run", "torch wrote values into the output (aten.copy_)"),
    # a write torch's dispatcher cannot see passes provenance; the no-op kernels give it away
    "numpy_write": ("dependence", "still returned the right answer"),
    # zeroes every tensor equal to its inputs, the harness's copies too (found through gc)
    "zeroes_copies": ("run", "changed the harness's private copy of input 0"),
}


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("hacks"), kernels=["add_triton", "softmax_triton"], hacks=[*HACKS, "partial_output"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "kernels/", cwd=root)
    return proc, by_kernel(parse_events(proc.stdout))


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_each_hack_is_flagged_suspicious_with_its_reason(stream, hack):
    events = stream[1][f"hack_{hack}"]
    rung, words = HACKS[hack]
    if rung is None:
        r = next(e for e in rungs(events).values() if e["status"] == "suspicious")
    else:
        r = rungs(events)[rung]
    assert r["status"] == "suspicious", (r["status"], r["message"])
    assert words in r["message"]
    assert finished(events)["verdict"] == "suspicious"


def test_output_left_to_the_allocator_fails_as_never_written_not_as_a_trick(stream):
    # ktui's poison makes it wrong whether it hoped for stale memory or missed a tail: it fails,
    # and the message says how many elements were never written
    r = rungs(stream[1]["hack_partial_output"])["correctness[size=1000]"]
    assert r["status"] == "failed" and "never written" in r["message"]
    assert finished(stream[1]["hack_partial_output"])["verdict"] == "failed"


def test_honest_kernels_pass_clean_including_the_replay_probe(stream):
    for name in ("add_triton", "softmax_triton"):
        events = stream[1][name]
        assert finished(events)["verdict"] == "passed"
        assert rungs(events)["integrity"]["status"] == "ok"


def test_suspicious_has_its_own_exit_code(stream):
    assert stream[0].returncode == 3


def test_strict_mode_runs_more_seeds_in_a_fresh_process(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    # --strict also waits for the reference's audit: a pass it cannot trust would exit 4
    proc = ktui("run", "--json", "--strict", "kernels/add_triton.py", cwd=root)
    assert proc.returncode == 0, proc.stderr
    events = parse_events(proc.stdout)
    assert events[0]["strict"] is True
    seeds = rungs(events)["correctness[size=1000]"]["figures"]["seeds"]
    assert len(set(seeds)) == 3
