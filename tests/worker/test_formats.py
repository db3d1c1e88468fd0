"""GPU MODE problem folders and KernelBench pairs run unchanged under ``ktui run``.

The problems are small ones written for these tests in each format (tests/fixtures/gpumode,
tests/fixtures/kernelbench), each with a right candidate and wrong ones that must fail. One
``ktui run --json`` covers a workspace holding both; a second runs a KernelBench pair named with
``--reference`` outside any workspace.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, by_kernel, finished, make_workspace, parse_events, rungs

from ktui.workspace import formats as detect
from ktui.workspace.kernels import ProblemError, discover, kernel_at

KB = FIXTURES / "kernelbench"
GPUMODE = FIXTURES / "gpumode"


def formats_workspace(root: Path) -> Path:
    """A workspace with the KernelBench problem under kb/, its candidates in kernels/, and the GPU
    MODE collection (a shared utils.py beside the scaleadd problem folder) under gpumode/."""
    make_workspace(root)
    (root / "kb").mkdir()
    shutil.copy(KB / "scale_shift_relu.py", root / "kb")
    for candidate in KB.glob("scale_shift_relu_*.py"):
        shutil.copy(candidate, root / "kernels")
    shutil.copytree(GPUMODE, root / "gpumode")
    return root


@pytest.fixture(scope="module")
def formats_run(tmp_path_factory, warm_ktui):
    root = formats_workspace(tmp_path_factory.mktemp("formats"))
    proc = warm_ktui("run", "--no-audit", "--json", "--seed", "5", "kernels/", "gpumode/scaleadd/", cwd=root)
    return root, proc, by_kernel(parse_events(proc.stdout))


# -- GPU MODE ------------------------------------------------------------------------------------
@pytest.mark.worker
def test_a_gpumode_folder_runs_every_submission_and_solution_against_its_reference(formats_run):
    root, _, kernels = formats_run
    ids = {k for k in kernels if k.startswith("scaleadd/")}
    assert ids == {"scaleadd/submission", "scaleadd/submission_wrong", "scaleadd/submission_partial",
                   "scaleadd/submission_mutates", "scaleadd/solutions/blocked/fast"}
    start = kernels["scaleadd/submission"][0]
    assert start["reference"] == str(root / "gpumode" / "scaleadd" / "reference.py")
    assert start["run_dir"].startswith(str(root / "gpumode" / "scaleadd" / ".ktui" / "runs" / "scaleadd"))


@pytest.mark.worker
def test_a_right_gpumode_submission_passes_ktui_metrics_and_the_problems_own_check(formats_run):
    for kernel in ("scaleadd/submission", "scaleadd/solutions/blocked/fast"):
        events = formats_run[2][kernel]
        r = rungs(events)
        assert finished(events)["verdict"] == "passed", r
        assert "gpumode" in r["pre-checks"]["message"]
        # task.yml's shapes, without its fixed seeds; the problem's check on each test shape
        assert [k for k in r if k.startswith("correctness[")] == ["correctness[size=1]", "correctness[size=1000]", "correctness[size=4097]"]
        # the problem's own check judged the same output as ktui's metrics, in the same rung
        assert all(r[f"correctness[size={n}]"]["figures"]["check"]["passed"] is True for n in (1, 1000, 4097))
        assert not any(k.startswith("check[") for k in r)
        assert [k for k in r if k.startswith("benchmark[")] == ["benchmark[size=1048576]", "benchmark[size=16777216]"]
        assert finished(events)["summary"]["correct"] == [3, 3]
        assert "output slot(s) in data: data[2] (left unwritten by generate_input)" in r["pre-checks"]["message"]


@pytest.mark.worker
def test_a_wrong_gpumode_submission_fails_both_ktui_and_check_implementation(formats_run):
    events = formats_run[2]["scaleadd/submission_wrong"]
    r = rungs(events)
    assert finished(events)["verdict"] == "failed"
    assert r["correctness[size=1000]"]["status"] == "failed"
    check = r["correctness[size=1000]"]
    assert check["status"] == "failed" and check["message"].startswith("check_implementation: mismatch")
    assert check["figures"]["check"]["passed"] is False


@pytest.mark.worker
def test_the_output_buffer_inside_data_is_poisoned_so_unwritten_elements_fail(formats_run):
    r = rungs(formats_run[2]["scaleadd/submission_partial"])
    assert r["run"]["status"] == "failed"
    assert "NaN/Inf" in r["run"]["message"]


@pytest.mark.worker
def test_writing_the_output_buffer_is_allowed_but_changing_an_input_is_suspicious(formats_run):
    events = formats_run[2]["scaleadd/submission_mutates"]
    assert finished(events)["verdict"] == "suspicious"
    assert rungs(events)["correctness[size=1000]"]["figures"]["mutated_inputs"] == [0]


@pytest.mark.worker
def test_task_yml_files_make_a_shared_module_from_elsewhere_importable(formats_run):
    root = formats_run[0]
    # reference.py does ``from utils import make_match_reference``; utils.py lives one folder up
    assert not (root / "gpumode" / "scaleadd" / "utils.py").exists()
    assert rungs(formats_run[2]["scaleadd/submission"])["pre-checks"]["status"] == "ok"
    kernel = kernel_at(root / "gpumode" / "scaleadd" / "submission.py")
    assert (root / "gpumode" / "utils.py").resolve() in kernel.files
    assert (root / "gpumode" / "scaleadd" / "task.yml").resolve() in kernel.files


# -- KernelBench ---------------------------------------------------------------------------------
@pytest.mark.worker
def test_a_kernelbench_candidate_is_judged_on_the_models_weights(formats_run):
    for name, weights in (("scale_shift_relu_triton", "copied"), ("scale_shift_relu_renamed", "seeded")):
        events = formats_run[2][name]
        r = rungs(events)
        assert finished(events)["verdict"] == "passed", r
        assert r["pre-checks"]["figures"]["weights"] == weights
        assert r["pre-checks"]["figures"]["format"] == "kernelbench"
        assert [k for k in r if k.startswith("correctness[")] == [f"correctness[trial={i}]" for i in range(1, 6)]
        assert "benchmark[default]" in r
        seeds = {r[f"correctness[trial={i}]"]["figures"]["seed"] for i in range(1, 6)}
        assert len(seeds) == 5


@pytest.mark.worker
def test_a_wrong_kernelbench_candidate_fails(formats_run):
    events = formats_run[2]["scale_shift_relu_nobias"]
    assert finished(events)["verdict"] == "failed"
    assert all(v["status"] == "failed" for k, v in rungs(events).items() if k.startswith("correctness["))


@pytest.mark.worker
def test_a_kernelbench_candidate_without_modelnew_is_told_what_is_missing(formats_run):
    events = formats_run[2]["scale_shift_relu_nomodel"]
    pre = rungs(events)["pre-checks"]
    assert pre["status"] == "failed"
    assert pre["message"] == "scale_shift_relu_nomodel.py defines no class ModelNew(nn.Module)"


@pytest.mark.worker
def test_the_run_exit_code_reports_the_worst_verdict(formats_run):
    assert formats_run[1].returncode == 3  # suspicious beats failed: submission_mutates changed its input


@pytest.mark.worker
def test_a_kernelbench_pair_runs_with_reference_outside_any_workspace(tmp_path, warm_ktui):
    pair = tmp_path / "pair"
    pair.mkdir()
    shutil.copy(KB / "scale_shift_relu.py", pair / "problem.py")
    shutil.copy(KB / "scale_shift_relu_triton.py", pair / "candidate.py")
    proc = warm_ktui("run", "--no-audit", "--json", "candidate.py", "--reference", "problem.py", cwd=pair)
    events = parse_events(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert finished(events)["verdict"] == "passed"
    assert events[0]["reference"] == str(pair / "problem.py")
    assert (pair / ".ktui" / "latest" / "candidate.json").is_file()


# -- discovery, in-process (no user code runs) ---------------------------------------------------
@pytest.mark.unit
def test_discovery_finds_formats_from_files_read_as_text(tmp_path):
    root = formats_workspace(tmp_path / "ws")
    kernels = {k.id: k for k in discover([root / "kernels", root / "gpumode" / "scaleadd"])}
    assert kernels["scale_shift_relu_triton"].format == "kernelbench"
    assert kernels["scaleadd/submission"].format == "gpumode"
    # task.yml's cases as it lists them: the worker takes each seed out of its shape and runs it too
    assert kernels["scaleadd/submission"].problem["tests"] == [{"size": 1, "seed": 5236}, {"size": 1000, "seed": 1001},
                                                                {"size": 4097, "seed": 5531}]
    assert kernels["scaleadd/submission"].problem["modules"]["utils"] == str((root / "gpumode" / "utils.py").resolve())
    # one file of a problem, and a folder inside its solutions/ tree, find the same problem
    single = discover([root / "gpumode" / "scaleadd" / "solutions"])
    assert [k.id for k in single] == ["scaleadd/solutions/blocked/fast"]


@pytest.mark.unit
def test_a_collection_of_gpumode_problems_keeps_its_shared_modules_out_of_the_kernels(tmp_path):
    shutil.copytree(GPUMODE, tmp_path / "problems")
    kernels = discover([tmp_path / "problems"])
    assert all(k.format == "gpumode" for k in kernels)
    assert "utils" not in {k.path.stem for k in kernels}


@pytest.mark.unit
def test_naming_the_gpumode_reference_as_a_kernel_is_refused(tmp_path):
    shutil.copytree(GPUMODE, tmp_path / "problems")
    with pytest.raises(ProblemError, match="reference, not a kernel"):
        discover([tmp_path / "problems" / "scaleadd" / "reference.py"])


@pytest.mark.unit
def test_a_broken_task_yml_makes_the_kernel_unrunnable_with_the_line(tmp_path):
    shutil.copytree(GPUMODE, tmp_path / "problems")
    task = tmp_path / "problems" / "scaleadd" / "task.yml"
    task.write_text("tests:\n  - {size: 1\n")
    kernel = kernel_at(tmp_path / "problems" / "scaleadd" / "submission.py")
    assert kernel.reference is None
    assert "task.yml: not valid YAML (line" in kernel.reference_error


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, words",
    [
        ("benchmarks: []\n", "no tests: list"),
        ("tests: {size: 1}\n", "must be a list of mappings"),
        ("tests: [{size: 1}]\nfiles: [{name: utils.py, source: ../nowhere.py}]\n", "../nowhere.py, which does not exist"),
    ],
)
def test_task_yml_mistakes_get_specific_messages(tmp_path, text, words):
    problem = tmp_path / "p"
    problem.mkdir()
    (problem / "reference.py").write_text("")
    (problem / "task.yml").write_text(text)
    with pytest.raises(detect.FormatError, match=words):
        detect.read_task(problem)


@pytest.mark.unit
def test_a_reference_file_tells_kernelbench_from_native(tmp_path):
    assert detect.reference_format(KB / "scale_shift_relu.py") == "kernelbench"
    assert detect.reference_format(Path(__file__).parents[2] / "references" / "add.py") == "native"
    assert detect.reference_format(GPUMODE / "scaleadd" / "reference.py") == "gpumode"


@pytest.mark.worker
@pytest.mark.gpu
def test_on_a_gpu_both_formats_run_every_rung_including_the_benchmark(tmp_path, warm_ktui):
    root = formats_workspace(tmp_path / "ws")
    proc = warm_ktui("run", "--no-audit", "--json", "kernels/scale_shift_relu_triton.py", "gpumode/scaleadd/submission.py", cwd=root)
    kernels = by_kernel(parse_events(proc.stdout))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for name in ("scale_shift_relu_triton", "scaleadd/submission"):
        r = rungs(kernels[name])
        assert kernels[name][0]["tier"] == "gpu"
        benches = [v for k, v in r.items() if k.startswith("benchmark[")]
        assert benches and all(v["status"] == "ok" and v["figures"]["speedup"] > 0 for v in benches), r
    assert rungs(kernels["scaleadd/submission"])["correctness[size=4097]"]["figures"]["check"]["passed"] is True


# -- output slots in data ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rowsum_run(tmp_path_factory, warm_ktui):
    root = formats_workspace(tmp_path_factory.mktemp("rowsum"))
    proc = warm_ktui("run", "--no-audit", "--json", "--seed", "3", "gpumode/rowsum/", cwd=root)
    return by_kernel(parse_events(proc.stdout))


@pytest.mark.worker
def test_a_buffer_in_data_that_the_kernel_returns_and_the_reference_ignores_is_an_output(rowsum_run):
    # rowsum's reference returns a new tensor and its generator makes the buffer with torch.zeros:
    # only the candidate returning it shows it is the output; writing it is no input mutation
    events = rowsum_run["rowsum/submission"]
    r = rungs(events)
    assert finished(events)["verdict"] == "passed", r
    assert "no output slot in data" in r["pre-checks"]["message"]
    assert "output slot(s) in data: data[1] (returned by custom_kernel" in r["run"]["message"]
    assert all(r[f"correctness[{s}]"]["figures"]["check"]["passed"] for s in ("rows=7,cols=1000", "rows=33,cols=4097"))


@pytest.mark.worker
def test_the_same_kernel_writing_its_result_into_a_true_input_is_suspicious(rowsum_run):
    events = rowsum_run["rowsum/submission_into_input"]
    r = rungs(events)
    assert finished(events)["verdict"] == "suspicious"
    assert r["correctness[rows=7,cols=1000]"]["figures"]["mutated_inputs"] == [0]
    assert "modified its input" in r["correctness[rows=7,cols=1000]"]["message"]


# -- fresh shapes ---------------------------------------------------------------------------------
@pytest.mark.worker
def test_a_gpumode_submission_is_checked_on_fresh_sizes_derived_from_task_yml(formats_run):
    fresh = rungs(formats_run[2]["scaleadd/submission"])["fresh-shapes"]
    assert fresh["status"] == "ok", fresh
    tried = fresh["figures"]["shapes"]
    # two sizes (the default), none of task.yml's, and its seeds are no dimension
    assert len(tried) == 2 and not {"size=1", "size=1000", "size=4097"} & set(tried)
    assert all(label.startswith("size=") and "seed" not in label for label in tried)


@pytest.mark.worker
def test_a_kernelbench_pair_declares_no_shapes_so_fresh_shapes_is_skipped(formats_run):
    fresh = rungs(formats_run[2]["scale_shift_relu_triton"])["fresh-shapes"]
    assert fresh["status"] == "skipped"
    assert fresh["message"] == "the kernelbench problem declares no shape list: no fresh shape to derive"
