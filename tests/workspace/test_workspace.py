"""Which kernels a saved file affects, in each problem format, and what an empty workspace says."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, REPO, ktui, make_workspace

from ktui.workspace.folder import KernelIndex, Workspace
from ktui.workspace.kernels import MAX_FOLDERS, ProblemError, discover, kernel_at


def ids(kernels) -> list[str]:
    return sorted(k.id for k in kernels)


@pytest.mark.unit
def test_a_reference_affects_every_kernel_judged_by_it_and_a_kernel_only_itself(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton", "softmax_triton", "add_cutedsl"])
    w = Workspace.at(ws)
    assert ids(w.affected_by(ws / "references" / "add.py")) == ["add_cutedsl", "add_triton"]
    assert ids(w.affected_by(ws / "references" / "softmax.py")) == ["softmax_triton"]
    assert ids(w.affected_by(ws / "kernels" / "softmax_triton.py")) == ["softmax_triton"]
    assert w.affected_by(ws / "kernels" / "notes.py") == []


@pytest.mark.unit
def test_a_new_reference_resolves_kernels_that_had_none(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "gelu_triton.py").write_text("def custom_kernel(x):\n    return x\n")
    w = Workspace.at(ws)
    (ws / "references" / "gelu.py").write_text("TESTS = []\n")
    assert ids(w.affected_by(ws / "references" / "gelu.py")) == ["gelu_triton"]


@pytest.mark.unit
def test_watching_the_root_the_kernels_folder_or_a_subfolder_finds_the_same_workspace(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "kernels" / "more").mkdir()
    shutil.copy(REPO / "kernels" / "add_triton.py", ws / "kernels" / "more" / "add_v2.py")
    assert ids(Workspace.at(ws).kernels()) == ["add_triton", "more/add_v2"]
    assert ids(Workspace.at(ws / "kernels").kernels()) == ["add_triton", "more/add_v2"]
    sub = Workspace.at(ws / "kernels" / "more")
    assert sub.root == ws.resolve() and ids(sub.kernels()) == ["more/add_v2"]


@pytest.mark.unit
def test_a_gpumode_problem_folder_reruns_every_submission_when_its_task_or_reference_changes(tmp_path):
    problem = tmp_path / "scaleadd"
    shutil.copytree(FIXTURES / "gpumode" / "scaleadd", problem)
    shutil.copy(FIXTURES / "gpumode" / "utils.py", tmp_path / "utils.py")
    w = Workspace.at(problem)
    assert w.gpumode and w.root == problem.resolve()
    everyone = ids(w.kernels())
    assert "scaleadd/submission" in everyone and "scaleadd/solutions/blocked/fast" in everyone
    assert ids(w.affected_by(problem / "task.yml")) == everyone
    assert ids(w.affected_by(problem / "reference.py")) == everyone
    assert ids(w.affected_by(problem / "submission_wrong.py")) == ["scaleadd/submission_wrong"]
    assert (tmp_path / "utils.py").parent.resolve() in w.watch_folders()  # task.yml's shared module


@pytest.mark.unit
def test_a_kernelbench_reference_outside_references_is_watched_too(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kb").mkdir()
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu.py", ws / "kb")
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu_triton.py", ws / "kernels")
    w = Workspace.at(ws)
    assert (ws / "kb").resolve() in w.watch_folders()
    assert ids(w.affected_by(ws / "kb" / "scale_shift_relu.py")) == ["scale_shift_relu_triton"]


@pytest.mark.unit
def test_missing_and_empty_folders_say_what_to_do(tmp_path):
    ws = tmp_path / "ws"
    (ws / "references").mkdir(parents=True)
    missing = Workspace.at(ws / "kernels")
    assert "no kernels/ folder" in missing.problem() and missing.kernels() == []
    (ws / "kernels").mkdir()
    assert "holds no kernel files yet" in Workspace.at(ws).problem()
    bare = tmp_path / "bare"
    (bare / "kernels").mkdir(parents=True)
    (bare / "kernels" / "add_x.py").write_text("x = 1\n")
    assert "no references/ folder" in Workspace.at(bare).problem()
    with pytest.raises(ProblemError, match="no such folder"):
        Workspace.at(tmp_path / "nowhere" / "deeper")
    with pytest.raises(ProblemError, match=r"nope: no such folder .*`ktui init DIR` creates a workspace"):
        Workspace.at(ws / "nope")  # a typo beside references/ is no kernels/ folder to wait for
    with pytest.raises(ProblemError, match="not a folder"):
        Workspace.at(bare / "kernels" / "add_x.py")


@pytest.mark.unit
def test_a_folder_of_broken_files_lists_them_without_raising(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "add_syntax.py").write_text("def custom_kernel(:\n")
    (ws / "kernels" / "add_binary.py").write_bytes(b"\xff\xfe\x00garbage")
    (ws / "kernels" / "nothing_known.py").write_text("")
    w = Workspace.at(ws)
    kernels = {k.id: k for k in w.kernels()}
    assert set(kernels) == {"add_binary", "add_syntax", "nothing_known"}
    assert kernels["nothing_known"].reference is None and "no reference" in kernels["nothing_known"].reference_error


@pytest.mark.unit
def test_the_kernel_index_rereads_a_saved_kernel_and_rescans_for_anything_else(tmp_path):
    from ktui.workspace.folder import KernelIndex

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton", "softmax_triton"])
    index = KernelIndex(Workspace.at(ws))
    kernel = ws / "kernels" / "add_triton.py"
    # a kernel that now names another reference is judged against it from this save on
    kernel.write_text(kernel.read_text().replace('REFERENCE = "add"', 'REFERENCE = "softmax"'))
    (hit,) = index.affected_by(kernel)
    assert hit.reference == (ws / "references" / "softmax.py").resolve()
    assert ids(index.affected_by(ws / "references" / "softmax.py")) == ["add_triton", "softmax_triton"]
    # a new file is found by the rescan; a removed one leaves the index
    new = ws / "kernels" / "add_new.py"
    new.write_text((REPO / "kernels" / "add_triton.py").read_text())
    assert ids(index.affected_by(new)) == ["add_new"]
    new.unlink()
    assert index.affected_by(new) == [] and "add_new" not in ids(index.kernels())


@pytest.mark.unit
def test_a_folder_named_like_a_kernel_hides_no_kernel_and_new_kernels_are_still_found(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "kernels" / "dirk.py").mkdir()
    index = KernelIndex(Workspace.at(ws))
    assert ids(index.kernels()) == ["add_triton"]
    shutil.copy(REPO / "kernels" / "softmax_triton.py", ws / "kernels" / "softmax_triton.py")
    assert ids(index.affected_by(ws / "kernels" / "softmax_triton.py")) == ["softmax_triton"]
    assert ids(index.kernels()) == ["add_triton", "softmax_triton"]


@pytest.mark.unit
@pytest.mark.parametrize("declared", ["/nonexistent/ktui/ref.py", "/etc/passwd", "../outside.py"])
def test_a_reference_outside_the_workspace_is_refused_and_never_watched(tmp_path, declared):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (tmp_path / "outside.py").write_text("TESTS = []\n")
    (ws / "kernels" / "far.py").write_text(f'REFERENCE = "{declared}"\n')
    w = Workspace.at(ws)
    far = {k.id: k for k in w.kernels()}["far"]
    assert far.reference is None and "outside the workspace" in far.reference_error
    assert ids(w.kernels()) == ["add_triton", "far"]
    assert all(folder.is_relative_to(ws) for folder in w.watch_folders())


@pytest.mark.worker
def test_symlinked_kernels_are_named_by_their_links_not_their_targets(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        shutil.copy(REPO / "kernels" / "add_triton.py", tmp_path / side / "evil_k.py")
    (ws / "kernels" / "add_one.py").symlink_to(tmp_path / "a" / "evil_k.py")
    (ws / "kernels" / "add_two.py").symlink_to(tmp_path / "b" / "evil_k.py")
    assert ids(Workspace.at(ws).kernels()) == ["add_one", "add_two"]
    proc = ktui("history", "kernels/add_two.py", cwd=ws)
    assert proc.returncode == 0 and proc.stdout.startswith("add_two:"), proc.stdout + proc.stderr


@pytest.mark.unit
def test_discovery_does_not_enter_another_workspace_below_the_folder_named(tmp_path):
    outer = tmp_path / "outer"
    inner = make_workspace(outer / "someone_else")
    problem = inner / "problems" / "rowsum"
    shutil.copytree(FIXTURES / "gpumode" / "rowsum", problem)
    (outer / "notes").mkdir()
    with pytest.raises(ProblemError, match="no kernel files"):
        discover([outer])


@pytest.mark.unit
def test_discovery_stops_at_its_folder_limit_and_says_what_to_name(tmp_path):
    big = tmp_path / "big"
    for i in range(MAX_FOLDERS + 1):
        (big / f"d{i}").mkdir(parents=True)
    with pytest.raises(ProblemError, match=f"more than {MAX_FOLDERS} folders.*name its root"):
        discover([big])


@pytest.mark.unit
def test_a_misspelled_reference_name_gets_the_closest_one_suggested(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_triton"])
    (ws / "kernels" / "typo.py").write_text('REFERENCE = "sofmtax"\n')
    kernel = kernel_at(ws / "kernels" / "typo.py")
    assert kernel.reference is None
    assert 'REFERENCE = "sofmtax" names references/sofmtax.py, which does not exist; did you mean softmax?' in kernel.reference_error


# -- what judges a kernel: the reference snapshot ------------------------------------------------
@pytest.mark.unit
def test_the_reference_hash_of_a_reference_without_workspace_imports_is_its_content_hash(tmp_path):
    from ktui.workspace.kernels import content_hash, reference_snapshot

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    snapshot = reference_snapshot(kernel_at(ws / "kernels" / "add_triton.py"))
    assert snapshot.modules == {} and list(snapshot.files) == [ws / "references" / "add.py"]
    assert snapshot.hash == content_hash((ws / "references" / "add.py").read_bytes())


@pytest.mark.unit
def test_the_workspace_modules_a_reference_imports_are_part_of_its_snapshot_and_hash(tmp_path):
    from ktui.workspace.kernels import content_hash, reference_hash, reference_snapshot

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "refpkg").mkdir()
    (ws / "refpkg" / "__init__.py").write_text("")
    (ws / "refpkg" / "ops.py").write_text("import helpers\n")
    (ws / "helpers.py").write_text("SCALE = 1\n")
    (ws / "shared").mkdir()  # a folder without __init__.py: a namespace package
    (ws / "shared" / "consts.py").write_text("EPS = 0\n")
    ref = ws / "references" / "add.py"
    ref.write_text("import os, torch\nfrom refpkg import ops\nfrom shared.consts import EPS\n" + ref.read_text())
    kernel = kernel_at(ws / "kernels" / "add_triton.py")
    snapshot = reference_snapshot(kernel)
    assert snapshot.modules == {"refpkg": ws / "refpkg" / "__init__.py", "refpkg.ops": ws / "refpkg" / "ops.py",
                                "helpers": ws / "helpers.py", "shared.consts": ws / "shared" / "consts.py"}
    assert reference_hash(kernel) == snapshot.hash != content_hash(ref.read_bytes())
    (ws / "helpers.py").write_text("SCALE = 2\n")  # a module imported by a module the reference imports
    assert reference_hash(kernel) != snapshot.hash


@pytest.mark.unit
@pytest.mark.parametrize("named_by", ["op", "path"])
def test_a_symlinked_reference_leaving_the_workspace_is_refused_whether_named_by_op_or_by_path(tmp_path, named_by):
    ws = make_workspace(tmp_path / "ws")
    outside = tmp_path / "elsewhere.py"
    shutil.copy(ws / "references" / "add.py", outside)
    (ws / "references" / "mul.py").symlink_to(outside)
    declared = "mul" if named_by == "op" else "references/mul.py"
    source = (REPO / "kernels" / "add_triton.py").read_text().replace('REFERENCE = "add"', f'REFERENCE = "{declared}"')
    (ws / "kernels" / "mul_triton.py").write_text(source)
    kernel = kernel_at(ws / "kernels" / "mul_triton.py")
    assert kernel.reference is None
    assert "outside the workspace" in kernel.reference_error
    assert f"references/mul.py is a link to {outside}" in kernel.reference_error
