"""What the driver ships of a workspace to a Ray node, read without Ray: the version's hash, the
imports that a node could not resolve, the workspace copy an actor writes (``ray.ship``, ``ray.files``)."""

import os
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, make_workspace

from ktui.dispatch.ray.files import ScratchRun, WorkspaceCopies, write_shipped
from ktui.dispatch.ray.ship import bundle_of, module_imports, refusals
from ktui.dispatch.runner import WorkerRunner
from ktui.dispatch.session import Session
from ktui.protocol.job import Options
from ktui.workspace.kernels import discover, kernel_for

pytestmark = pytest.mark.unit

HELPED = '''import torch
import triton
import triton.language as tl

from add_helpers import BLOCK, OFFSET

REFERENCE = "add"


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, offset, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask) + offset,
             mask=mask)


def custom_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), OFFSET, BLOCK=BLOCK)
    return out
'''

HELPERS = '''"""What the add kernels of this workspace share."""

BLOCK = 1024
OFFSET = 0.0{extra}
'''


def helped_workspace(root: Path, extra: str = "") -> Path:
    """A workspace whose kernel imports its block size and offset from a helper module at the root."""
    ws = make_workspace(root)
    (ws / "kernels" / "add_helped.py").write_text(HELPED)
    (ws / "add_helpers.py").write_text(HELPERS.format(extra=extra))
    return ws


def prepared(ws: Path):
    """Each kernel's Job, as ``ktui run`` prepares it (nothing runs)."""
    session = Session(ws, runner=WorkerRunner())
    try:
        return [session.prepare(kernel, Options(seed=7)) for kernel in discover([ws / "kernels"])]
    finally:
        session.close()


def test_an_edit_to_a_helper_is_a_new_workspace_version_and_a_new_run_folder_is_not(tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    jobs = prepared(ws)
    first = bundle_of(str(ws), jobs)
    assert "add_helpers.py" in first.files and "kernels/add_helped.py" in first.files
    assert "references/add.py" in first.files
    prepared(ws)  # writes .ktui/ (the history, a run folder): not part of what is shipped
    assert bundle_of(str(ws), jobs).digest == first.digest
    (ws / "add_helpers.py").write_text(HELPERS.format(extra=" + 1.0"))
    edited = bundle_of(str(ws), jobs)
    assert edited.digest != first.digest
    assert edited.files["add_helpers.py"] != first.files["add_helpers.py"]


def test_the_calibration_travels_with_the_workspace(tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    (ws / ".ktui").mkdir(exist_ok=True)
    (ws / ".ktui" / "calibration.json").write_text("{}")
    assert ".ktui/calibration.json" in bundle_of(str(ws), prepared(ws)).files


def test_a_helper_in_the_workspace_resolves_and_an_installed_module_too(tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    [job] = [j for j in prepared(ws) if j.kernel_id == "add_helped"]
    assert refusals(job, bundle_of(str(ws), [job])) == []


def test_an_import_found_nowhere_is_refused_with_its_file_and_line(tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    (ws / "kernels" / "add_helped.py").write_text(HELPED.replace("from add_helpers", "from add_helpers_lost"))
    [job] = prepared(ws)
    [reason] = refusals(job, bundle_of(str(ws), [job]))
    assert reason.startswith("kernels/add_helped.py:5 imports 'add_helpers_lost', which ktui finds neither")
    assert "a node gets the workspace's files and its own installed packages only" in reason


def test_a_helper_that_is_a_symlink_is_refused_as_not_shipped(tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    kept = tmp_path / "elsewhere" / "add_helpers.py"
    kept.parent.mkdir()
    os.replace(ws / "add_helpers.py", kept)
    (ws / "add_helpers.py").symlink_to(kept)
    [job] = prepared(ws)
    [reason] = refusals(job, bundle_of(str(ws), [job]))
    assert f"imports 'add_helpers', which resolves here to {ws / 'add_helpers.py'}, a file a Ray node does not receive" in reason


def test_only_imports_that_run_when_the_file_loads_are_checked():
    source = '''
import os
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    import typed_only
try:
    import optional_one
except ImportError:
    optional_one = None
if os.name == "posix":
    import posix_only
from . import sibling


def later():
    import inside_a_function
'''
    assert [name for _, name in module_imports(source)] == ["os", "typing", "posix_only"]
    assert list(module_imports("def broken(:\n")) == []  # the worker reports the syntax error


def test_an_actor_writes_each_workspace_version_once_and_forgets_the_oldest(tmp_path):
    copies = WorkspaceCopies(tmp_path / "scratch", keep=2)
    fetched: list[str] = []

    def version(text):
        return lambda: fetched.append(text) or {"kernels/k.py": text.encode(), "lib/h.py": b"H"}

    first = copies.get("aaaa", version("one"))
    assert (first / "kernels" / "k.py").read_text() == "one" and (first / "lib" / "h.py").read_bytes() == b"H"
    assert copies.get("aaaa", version("one again")) == first  # reused: not fetched, not written again
    copies.get("bbbb", version("two"))
    copies.get("cccc", version("three"))
    assert fetched == ["one", "two", "three"]
    assert sorted(p.name for p in copies.base.iterdir()) == ["bbbb", "cccc"]  # the least recently used went


def test_a_gpumode_module_kept_outside_the_problem_travels_and_its_path_comes_back(tmp_path):
    shutil.copytree(FIXTURES / "gpumode", tmp_path / "gpumode")  # scaleadd/task.yml: utils.py from ../utils.py
    problem = tmp_path / "gpumode" / "scaleadd"
    session = Session(problem, runner=WorkerRunner())
    try:
        job = session.prepare(kernel_for(problem / "submission.py"), Options(seed=7))
    finally:
        session.close()
    utils = str(tmp_path / "gpumode" / "utils.py")
    bundle = bundle_of(job.root, [job])
    assert list(bundle.outside) == [utils] and "reference.py" in bundle.files
    assert refusals(job, bundle) == []  # `from utils import ...` names a module task.yml brings in
    copy = WorkspaceCopies(tmp_path / "scratch").get(bundle.digest, lambda: bundle.files)
    scratch = ScratchRun(tmp_path / "scratch", job, copy=copy, outside=bundle.outside)
    moved = scratch.job.problem["modules"]["utils"]
    assert Path(moved).is_relative_to(copy) and Path(moved).read_text() == Path(utils).read_text()
    assert scratch.job.kernel_path == str(copy / "submission.py") and scratch.job.root == str(copy)
    said = scratch.back({"type": "rung_finished", "message": f"{moved}:3 and {copy / 'reference.py'}"})
    assert said["message"] == f"{utils}:3 and {problem / 'reference.py'}"


def test_a_file_shipped_while_small_and_then_grown_past_the_limit_is_withdrawn_from_the_driver(tmp_path):
    """A cubin is written in pieces: the actor may see its first bytes, ship them, and only then
    see it over the limit. The driver must end with no copy of it rather than a truncated one."""
    [job] = prepared(make_workspace(tmp_path / "ws", ["add_triton"]))
    scratch = ScratchRun(tmp_path / "scratch", job, max_file_bytes=2000)
    local = Path(job.run_dir)
    local.mkdir(parents=True, exist_ok=True)
    growing = scratch.path / "add_kernel.cubin"
    growing.write_bytes(bytes(100))  # the first write the actor happens to see
    write_shipped(job.run_dir, scratch.new_files())
    assert (local / "add_kernel.cubin").stat().st_size == 100
    with growing.open("ab") as f:
        f.write(bytes(5000))
    write_shipped(job.run_dir, scratch.new_files())
    assert not (local / "add_kernel.cubin").exists()
    assert scratch.shipped_bytes == 0
    finish = scratch.back({"type": "run_finished", "message": "", "summary": {}})
    assert finish["summary"]["not_shipped"][0].startswith("add_kernel.cubin (5100 B) was not shipped back")
