"""Every class of bad input ends with a specific verdict and message, and loses nothing.

One ``ktui run --json`` over a workspace of deliberately broken kernels (tests/fixtures), then
one test per class reads its part of the event stream.
"""

from __future__ import annotations

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker

BROKEN = [
    "syntax_error",
    "no_custom_kernel",
    "missing_reference",
    "compile_error",
    "wrong_shape",
    "wrong_dtype",
    "wrong_device",
    "partial_write",
    "wrong_values",
    "crash_segfault",
    "sys_exit",
    "raises",
    "badgen_triton",
    "no_kernel",
    "oob_write",
    "softmax_wrong_norm",
    "host_name_error",
    "launches_nothing",
]


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("broken"), kernels=["add_triton"], fixtures=BROKEN)
    proc = ktui("run", "--no-audit", "--json", "--seed", "7", "kernels/", cwd=root)
    events = parse_events(proc.stdout)
    return proc, by_kernel(events), root


def test_a_broken_kernel_among_good_ones_does_not_stop_the_others(stream):
    proc, kernels, _ = stream
    assert set(kernels) == {*BROKEN, "add_triton"}
    assert finished(kernels["add_triton"])["verdict"] == "passed"
    assert proc.returncode == 2  # missing_reference: ktui could not run that one


def test_syntax_error_points_at_file_line_and_column(stream):
    pre = rungs(stream[1]["syntax_error"])["pre-checks"]
    assert pre["status"] == "failed"
    assert pre["error"]["type"] == "SyntaxError"
    loc = pre["error"]["location"]
    assert loc["file"].endswith("syntax_error.py") and loc["line"] == 11
    assert "^" in loc["excerpt"]
    assert list(rungs(stream[1]["syntax_error"])) == ["pre-checks"]  # found before any worker: no ladder


def test_missing_custom_kernel_says_so(stream):
    pre = rungs(stream[1]["no_custom_kernel"])["pre-checks"]
    assert pre["status"] == "failed"
    assert "defines no function custom_kernel" in pre["message"]


def test_missing_reference_is_an_error_not_a_failure(stream):
    events = stream[1]["missing_reference"]
    assert finished(events)["verdict"] == "error"
    assert "nosuchop" in rungs(events)["pre-checks"]["message"]


def test_compile_error_is_reported_at_the_users_line_not_as_mlir(stream):
    comp = rungs(stream[1]["compile_error"])["compile"]
    assert comp["status"] == "failed"
    loc = comp["error"]["location"]
    assert loc["file"].endswith("compile_error.py") and loc["line"] == 11
    assert "arange" in loc["excerpt"]
    assert len(comp["message"].splitlines()) <= 13
    assert rungs(stream[1]["compile_error"])["run"]["status"] == "skipped"


@pytest.mark.parametrize(
    "kernel, words",
    [
        ("wrong_shape", "has shape"),
        ("wrong_dtype", "has dtype float64"),
        ("wrong_device", "is on meta"),
    ],
)
def test_wrong_output_structure_fails_the_run_rung_with_a_specific_message(stream, kernel, words):
    events = stream[1][kernel]
    run = rungs(events)["run"]
    assert run["status"] == "failed"
    assert words in run["message"]
    assert finished(events)["verdict"] == "failed"


def test_unwritten_output_is_caught_by_poisoning_on_the_shapes_it_misses(stream):
    r = rungs(stream[1]["partial_write"])
    assert r["correctness[size=1000]"]["status"] == "ok"  # one block covers it
    tail = r["correctness[size=12345]"]
    assert tail["status"] == "failed"  # a bug (a grid that misses the tail), not a trick
    assert tail["figures"]["unwritten"] == 12345 - 12 * 1024
    assert "never written" in tail["message"]


def test_wrong_values_fail_every_shape_with_figures(stream):
    r = rungs(stream[1]["wrong_values"])
    checks = {k: v for k, v in r.items() if k.startswith("correctness[")}
    assert checks and all(v["status"] == "failed" for v in checks.values())
    figures = checks["correctness[size=1000]"]["figures"]
    assert figures["max_abs"] == pytest.approx(1e-3, rel=0.05)
    assert figures["mismatched"] > 0 and len(figures["worst_index"]) == 1


def test_a_wrong_answer_that_happens_to_be_constant_is_failed_not_suspicious(stream):
    # softmax of one column is 1.0 whatever the input: a constant wrong answer there is a bug, not a cache
    events = stream[1]["softmax_wrong_norm"]
    assert finished(events)["verdict"] == "failed"
    assert not [r for r in rungs(events).values() if r["status"] == "suspicious"]


def test_segfault_ends_the_run_crashed_with_the_signal(stream):
    events = stream[1]["crash_segfault"]
    end = finished(events)
    assert end["verdict"] == "crashed"
    assert "SIGSEGV" in end["message"]


def test_an_out_of_bounds_write_ends_in_a_verdict_not_a_dead_caller(stream):
    end = finished(stream[1]["oob_write"])
    assert end["verdict"] in ("crashed", "failed")


def test_sys_exit_is_caught_as_a_failed_rung(stream):
    r = rungs(stream[1]["sys_exit"])
    assert r["compile"]["status"] in ("ok", "failed")
    assert any("sys.exit(3)" in v["message"] for v in r.values())


def test_a_python_error_in_custom_kernel_names_the_users_line(stream):
    run = rungs(stream[1]["raises"])["run"]
    assert run["status"] == "failed" and run["error"]["type"] == "KeyError"
    assert run["error"]["location"]["file"].endswith("raises.py")


def test_an_input_generator_that_raises_is_a_reference_error_on_its_shape_only(stream):
    r = rungs(stream[1]["badgen_triton"])
    assert r["correctness[size=16]"]["status"] == "ok"
    bad = r["correctness[size=-1]"]
    assert bad["status"] == "error" and bad["message"].startswith("reference error: generate_input(")
    assert bad["error"]["location"]["file"].endswith("badgen.py")
    assert finished(stream[1]["badgen_triton"])["verdict"] == "error"


def test_a_file_without_any_gpu_kernel_fails_pre_checks(stream):
    pre = rungs(stream[1]["no_kernel"])["pre-checks"]
    assert pre["status"] == "failed" and "no Triton" in pre["message"]


def test_nothing_was_lost_every_run_is_in_the_history(stream):
    _, _kernels, root = stream
    proc = ktui("history", "--json", "kernels/wrong_values.py", cwd=root)
    assert proc.returncode == 0
    records = parse_events(proc.stdout)
    assert records and records[0]["verdict"] == "failed"
    assert any(r["rung"].startswith("correctness[") for r in records[0]["rungs"])


def test_a_host_error_before_any_launch_says_custom_kernel_raised_it_not_that_compile_failed(stream):
    events = stream[1]["host_name_error"]
    compile = rungs(events)["compile"]
    assert compile["status"] == "failed"
    assert compile["message"].startswith(
        "custom_kernel raised NameError on the host before any kernel compiled (host_name_error.py:18):")
    assert "BLOCK_SIZE" in compile["message"]
    assert compile["error"]["location"]["line"] == 18 and "Traceback" in compile["error"]["traceback"]
    assert finished(events)["summary"]["first_failure"]["message"].startswith("custom_kernel raised NameError")


def test_after_a_suspicious_compile_later_rungs_say_compile_was_suspicious(stream):
    events = stream[1]["launches_nothing"]
    steps = rungs(events)
    assert steps["compile"]["status"] == "suspicious"
    assert steps["run"] == {**steps["run"], "status": "skipped", "message": "compile was suspicious"}
    assert all(r["message"] == "compile was suspicious" for name, r in steps.items()
               if name.startswith(("correctness[", "benchmark[")))
