"""What users and their kernels get wrong, told as what it is: a crashed worker's last words, a
reference's generator that returns no tensor or raises, a ``ref_kernel`` that raises, a REFERENCE
outside the workspace, a folder named like a kernel. Each through the real ``ktui run`` (CPU tier),
in a workspace made here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, by_kernel, finished, ktui, make_workspace, parse_events, rungs

pytestmark = pytest.mark.worker

PRINTS = '''
print("the previous kernel was here")
'''
ABORTS = '''
import os


def custom_kernel(x, y):
    print("realloc(): invalid pointer", end="")  # half a line, then the process dies
    os.abort()
'''
GENERATORS = {"gennone": "None", "gennumber": "7", "genstrings": '("a", "b")'}
REFERENCE = '''
import torch

TESTS = [{{"size": 16}}]


def generate_input(seed: int, size: int):
    return {value}


def ref_kernel(x):
    return x * 2
'''
# A reference that raises: in its generator on one shape (line 9), in ref_kernel on another (line 15).
RAISES = '''import torch

TESTS = [{"size": 16}, {"size": 8}, {"size": 4}]
BENCHMARKS = [{"size": 16}]


def generate_input(seed: int, size: int):
    if size == GENERATOR_FAILS:
        raise ValueError("no inputs of size %d" % size)
    return (torch.randn(size, generator=torch.Generator().manual_seed(seed)),)


def ref_kernel(x):
    if x.numel() == REFERENCE_FAILS:
        raise KeyError("triple")
    return x * 2
'''
RAISING = {"genraises": (16, 0), "refraises": (0, 8)}  # (GENERATOR_FAILS, REFERENCE_FAILS)
# Names of the contract misspelt: the required ones fail the pre-checks, an optional one is not read.
MISSPELT = {"typos": [("TESTS = ", "TEST = "), ("def generate_input(", "def generate_inputs(")],
            "optional": [("BENCHMARKS = ", "Benchmark = ")]}


@pytest.fixture(scope="module")
def worker_run(tmp_path_factory):
    """A kernel that prints, then one that aborts mid-line in the same warm worker; and kernels
    judged by references whose generate_input returns None, a number, strings."""
    ws = make_workspace(tmp_path_factory.mktemp("bad") / "ws")
    add = (REPO / "kernels" / "add_triton.py").read_text()
    (ws / "kernels" / "crash_0_prints.py").write_text(add + PRINTS)
    (ws / "kernels" / "crash_1_aborts.py").write_text(add.replace("def custom_kernel", "def _unused") + ABORTS)
    for op, value in GENERATORS.items():
        (ws / "references" / f"{op}.py").write_text(REFERENCE.format(value=value))
        shutil.copy(FIXTURES / "kernels" / "badgen_triton.py", ws / "kernels" / f"{op}_triton.py")
    for op, (generator, reference) in RAISING.items():
        (ws / "references" / f"{op}.py").write_text(
            RAISES.replace("GENERATOR_FAILS", str(generator)).replace("REFERENCE_FAILS", str(reference)))
        shutil.copy(FIXTURES / "kernels" / "badgen_triton.py", ws / "kernels" / f"{op}_triton.py")
    for op, changes in MISSPELT.items():
        text = RAISES.replace("GENERATOR_FAILS", "0").replace("REFERENCE_FAILS", "0")
        for right, wrong in changes:
            text = text.replace(right, wrong)
        (ws / "references" / f"{op}.py").write_text(text)
        shutil.copy(FIXTURES / "kernels" / "badgen_triton.py", ws / "kernels" / f"{op}_triton.py")
    (ws / "kernels" / "add_kernal.py").write_text(add.replace("def custom_kernel(", "def custom_kernal("))
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "kernels", cwd=ws, timeout=600)
    return ws, proc, by_kernel(parse_events(proc.stdout))


def test_a_crash_message_carries_the_workers_last_line_even_without_a_newline(worker_run):
    _, proc, kernels = worker_run
    end = finished(kernels["crash_1_aborts"])
    assert end["verdict"] == "crashed", proc.stderr
    first_line = end["message"].splitlines()[0]
    assert "SIGABRT" in first_line and "its last output: realloc(): invalid pointer" in first_line
    assert "realloc(): invalid pointer" in end["summary"]["first_failure"]["message"]


def test_a_crash_message_does_not_show_what_the_previous_kernel_printed(worker_run):
    _, _, kernels = worker_run
    assert finished(kernels["crash_0_prints"])["verdict"] == "passed"
    assert "the previous kernel was here" not in finished(kernels["crash_1_aborts"])["message"]


def test_history_and_the_summary_line_show_the_crash_s_last_line(worker_run):
    ws, _, _ = worker_run
    proc = ktui("history", "kernels/crash_1_aborts.py", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    assert "crashed" in proc.stdout and "realloc(): invalid pointer" in proc.stdout


@pytest.mark.parametrize("op, said", [("gennone", "returned None"), ("gennumber", "returned 7 (int)"),
                                      ("genstrings", "returned ('a', 'b') (tuple of str)")])
def test_a_generator_that_returns_no_tensor_is_blamed_not_the_kernel(worker_run, op, said):
    _, _, kernels = worker_run
    assert finished(kernels[f"{op}_triton"])["verdict"] == "error"
    failed = [r for r in rungs(kernels[f"{op}_triton"]).values() if r["status"] == "error"]
    assert failed, kernels[f"{op}_triton"]
    first = failed[0]
    assert first["message"].startswith("reference error: generate_input(") and said in first["message"]
    assert "tensor" in first["message"]
    location = (first.get("error") or {}).get("location")
    assert not location or not location["file"].endswith(f"{op}_triton.py")  # never the kernel's line


@pytest.mark.parametrize("op, rung, said, line", [
    ("genraises", "compile", "generate_input(seed=", 9),  # the traced call's inputs: the first benchmark shape
    ("refraises", "correctness[size=8]", "ref_kernel raised KeyError: 'triple'", 15),
])
def test_a_reference_that_raises_is_a_reference_error_at_its_line_not_the_kernels_failure(worker_run, op, rung,
                                                                                            said, line):
    _, _, kernels = worker_run
    events = kernels[f"{op}_triton"]
    end, steps = finished(events), rungs(events)
    assert end["verdict"] == "error", end
    assert steps[rung]["status"] == "error"
    assert steps[rung]["message"].startswith("reference error: ") and said in steps[rung]["message"]
    assert steps[rung]["message"].endswith(f", at references/{op}.py:{line}")
    assert Path(steps[rung]["error"]["location"]["file"]).name == f"{op}.py"
    assert steps[rung]["error"]["location"]["line"] == line
    assert not [r for r in steps.values() if r["status"] == "failed"]  # nothing blames the kernel
    assert end["summary"]["first_failure"]["rung"] == rung


def test_a_reference_error_exits_2_and_reads_as_one(worker_run, warm_ktui):
    ws, _, _ = worker_run
    proc = warm_ktui("run", "--no-audit", "--seed", "5", "kernels/refraises_triton.py", cwd=ws)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "[correctness[size=8]] error — reference error: ref_kernel raised KeyError: 'triple', at " \
           "references/refraises.py:15" in lines
    assert "[fresh-shapes, integrity, dependence] skipped — the reference raised in correctness[size=8]" in lines
    summary = next(line for line in lines if line.startswith("refraises_triton v"))
    assert " error · " in summary and "reference error: ref_kernel raised KeyError" in summary


@pytest.mark.parametrize("kernel, said", [
    ("add_kernal", "add_kernal.py defines no function custom_kernel(*inputs) (it defines custom_kernal: did you "
                   "mean custom_kernel?)"),
    ("typos_triton", "reference typos.py lacks generate_input, TESTS (it defines generate_inputs: did you mean "
                     "generate_input?; TEST: did you mean TESTS?)"),
])
def test_a_misspelt_name_of_the_contract_fails_the_pre_checks_saying_which_was_meant(worker_run, kernel, said):
    _, _, kernels = worker_run
    pre = rungs(kernels[kernel])["pre-checks"]
    assert (pre["status"], pre["message"]) == ("failed", said)


def test_a_misspelt_optional_name_is_said_not_read(worker_run):
    _, _, kernels = worker_run
    pre = rungs(kernels["optional_triton"])["pre-checks"]
    assert pre["status"] == "ok" and "0 benchmark shape(s)" in pre["message"]
    assert "Benchmark is not a name ktui reads: did you mean BENCHMARKS?" in pre["message"]


def test_a_kernel_that_printed_says_so_under_its_summary_and_where_the_output_is_kept(worker_run, warm_ktui):
    ws, _, _ = worker_run
    proc = warm_ktui("run", "--no-audit", "--no-bench", "kernels/crash_0_prints.py", cwd=ws)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    note = proc.stdout.splitlines()[-1]
    assert note.startswith("  printed ") and note.endswith(" (-v prints them as they come)")
    kept = ws / note.split(", kept in ")[1].split(" (")[0]
    assert kept == ws / ".ktui" / "runs" / "crash_0_prints" / "1" / "output.txt"
    assert "the previous kernel was here" in kept.read_text()
    assert "the previous kernel was here" not in proc.stdout  # without -v, only where it is


def test_a_reference_outside_the_workspace_fails_its_kernel_and_the_others_still_run(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "kernels" / "far_missing.py").write_text('REFERENCE = "/nonexistent/ktui/ref.py"\n')
    (ws / "kernels" / "far_passwd.py").write_text('REFERENCE = "/etc/passwd"\n')
    (ws / "kernels" / "dirk.py").mkdir()  # a folder named like a kernel hides nothing
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "kernels", cwd=ws, timeout=600)
    kernels = by_kernel(parse_events(proc.stdout))
    assert finished(kernels["add_triton"])["verdict"] == "passed", proc.stderr
    for name in ("far_missing", "far_passwd"):
        end = finished(kernels[name])
        assert end["verdict"] == "error" and "outside the workspace" in end["message"]
        assert kernels[name][0]["tier"] == "-"  # never handed to a worker: /etc/passwd is not imported
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


HOSTILE = "add_\x1b]2;HIJACKED\x07\x1b[2J\x85.py"  # a window title, a cleared screen, a C1 control
SHOWN = "add_\\x1b]2;HIJACKED\\x07\\x1b[2J\\x85"


def test_escapes_in_a_file_name_and_a_kernels_output_are_shown_by_run_history_and_diff_and_kept_in_json(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    source = (REPO / "kernels" / "add_triton.py").read_text() + '\nprint("\\x1b]52;c;UFdORUQ=\\x07clip")\n'
    (ws / "kernels" / HOSTILE).write_text(source)
    run = ktui("run", "--no-audit", f"kernels/{HOSTILE}", "--no-bench", "-v", cwd=ws)
    history = ktui("history", f"kernels/{HOSTILE}", cwd=ws)
    diff = ktui("diff", f"kernels/{HOSTILE}", cwd=ws)
    as_json = ktui("history", f"kernels/{HOSTILE}", "--json", cwd=ws)
    assert run.returncode == 0, run.stdout + run.stderr
    for proc in (run, history, diff):
        said = proc.stdout + proc.stderr
        assert not [c for c in said if c in "\x1b\x07\x85"], said  # nothing a terminal would obey
    assert SHOWN in run.stdout and "\\x1b]52;c;UFdORUQ=\\x07clip" in run.stdout
    assert SHOWN in history.stdout and SHOWN in diff.stderr
    assert parse_events(as_json.stdout)[0]["kernel"] == HOSTILE[:-3]  # JSON carries the name unchanged


def test_a_kernel_python_cannot_decode_fails_the_pre_checks_at_its_byte_and_a_declared_encoding_runs(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    add = (REPO / "kernels" / "add_triton.py").read_bytes()
    (ws / "kernels" / "add_latin1.py").write_bytes(b"# caf\xe9, written in Latin-1\n" + add)
    (ws / "kernels" / "add_declared.py").write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9, and it says so\n" + add)
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--seed", "1", "kernels", cwd=ws)
    kernels = by_kernel(parse_events(proc.stdout))
    checks = rungs(kernels["add_latin1"])["pre-checks"]
    assert checks["status"] == "failed" and finished(kernels["add_latin1"])["verdict"] == "failed"
    assert checks["message"].startswith("SyntaxError: not valid UTF-8: byte 0xe9 (invalid continuation byte); "
                                        "Python cannot import this file")
    assert checks["message"].endswith("(add_latin1.py:1:6)") and checks["error"]["location"]["line"] == 1
    assert finished(kernels["add_declared"])["verdict"] == "passed", proc.stdout[-2000:]
    assert proc.returncode == 1
