"""Which references ``ktui audit PATH...`` names, read as text before any audit process starts."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, make_workspace

from ktui.dispatch.auditor import find_targets, is_reference
from ktui.protocol.job import GPUMODE, KERNELBENCH, NATIVE
from ktui.workspace.kernels import ProblemError

pytestmark = pytest.mark.unit


def names(targets) -> list[tuple[str, str]]:
    return [(t.name, t.format) for t in targets]


def test_a_kernel_names_its_reference_and_a_reference_names_itself(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton", "softmax_triton"])
    targets = find_targets([ws / "kernels" / "add_triton.py", ws / "references" / "add.py",
                            ws / "kernels" / "softmax_triton.py"])
    assert names(targets) == [("add", NATIVE), ("softmax", NATIVE)]  # add once: the same reference
    assert all(t.root == ws.resolve() for t in targets)  # cached where `ktui run` keeps the kernels' history


def test_a_workspace_means_every_reference_in_it(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    found = {t.name for t in find_targets([ws])}
    assert {"add", "softmax", "badgen"} <= found
    assert found == {t.name for t in find_targets([ws / "references"])}


def test_gpumode_problems_are_audited_with_their_task_shapes_and_files(tmp_path):
    shutil.copytree(FIXTURES / "gpumode", tmp_path / "gpumode")
    collection = find_targets([tmp_path / "gpumode"])
    assert names(collection) == [("rowsum", GPUMODE), ("scaleadd", GPUMODE), ("seedsort", GPUMODE)]  # utils.py is no problem
    one = find_targets([tmp_path / "gpumode" / "scaleadd"])
    assert one == find_targets([tmp_path / "gpumode" / "scaleadd" / "submission.py"])
    assert one == find_targets([tmp_path / "gpumode" / "scaleadd" / "reference.py"])
    scaleadd = one[0]
    assert [t["size"] for t in scaleadd.problem["tests"]] == [1, 1000, 4097]
    assert set(scaleadd.problem["modules"]) == {"task", "utils", "reference"}
    assert scaleadd.hash() == collection[1].hash()
    assert [t["seed"] for t in scaleadd.problem["tests"]] == [5236, 1001, 5531]  # the worker runs them too


def test_a_kernelbench_problem_is_a_reference_with_or_without_a_kernel(tmp_path):
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu.py", tmp_path / "problem.py")
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu_triton.py", tmp_path / "candidate.py")
    assert is_reference(tmp_path / "problem.py") and not is_reference(tmp_path / "candidate.py")
    alone = find_targets([], reference=tmp_path / "problem.py")
    assert names(alone) == [("problem", KERNELBENCH)]
    judged = find_targets([tmp_path / "candidate.py"], reference=tmp_path / "problem.py")
    assert names(judged) == [("problem", KERNELBENCH)] and judged[0].reference == alone[0].reference


def test_what_names_no_reference_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ProblemError, match="no such file or folder"):
        find_targets([tmp_path / "missing.py"])
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("nothing to audit\n")
    with pytest.raises(ProblemError, match="no reference here"):
        find_targets([tmp_path / "notes"])
    with pytest.raises(ProblemError, match="no such reference file"):
        find_targets([], reference=tmp_path / "nope.py")
