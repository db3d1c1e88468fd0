"""A finished run of exactly what is on disk is current, for every format: the watch loop does not
re-run it at start and the dashboard does not call it stale. Both ask the one reference hash a run
records (``ktui.workspace.kernels.reference_hash``), which covers the files a reference needs."""

from __future__ import annotations

import shutil

import pytest
from conftest import FIXTURES, ktui, make_workspace

from ktui.history.current import is_current
from ktui.history.store import Store
from ktui.protocol.notices import Saved
from ktui.protocol.statedir import state_dir
from ktui.tui.state import DashboardState
from ktui.workspace.kernels import content_hash, discover

pytestmark = pytest.mark.worker


def workspace_with_gpumode_and_kernelbench(root):
    make_workspace(root)
    shutil.copytree(FIXTURES / "gpumode", root / "gpumode")
    (root / "kb").mkdir()
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu.py", root / "kb")
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu_triton.py", root / "kernels")
    return root


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = workspace_with_gpumode_and_kernelbench(tmp_path_factory.mktemp("current"))
    targets = ["gpumode/scaleadd/submission.py", "kernels/scale_shift_relu_triton.py"]
    proc = ktui("run", "--no-audit", "--no-bench", "--seed", "3", *targets, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root, {t: discover([root / t])[0] for t in targets}  # as `ktui run` and `ktui watch` find them


@pytest.mark.parametrize("target", ["gpumode/scaleadd/submission.py", "kernels/scale_shift_relu_triton.py"])
def test_a_finished_run_of_what_is_on_disk_is_current_and_not_stale(ran, target):
    root, kernels = ran
    kernel = kernels[target]
    kernel_id = kernel.id
    store = Store.of(state_dir(kernel.root))
    try:
        assert is_current(store, kernel)
        state = DashboardState(root)
        state.load(store, [kernel])
        assert not state.kernels[kernel_id].stale
    finally:
        store.close()


def test_an_edit_of_a_file_the_reference_needs_makes_it_stale(ran, tmp_path):
    root, kernels = ran
    kernel = kernels["gpumode/scaleadd/submission.py"]
    task = root / "gpumode" / "scaleadd" / "task.yml"
    assert task in kernel.dependencies
    store = Store.of(state_dir(kernel.root))
    original = task.read_text()
    try:
        state = DashboardState(root)
        state.load(store, [kernel])
        task.write_text(original + "\n# edited\n")
        assert not is_current(store, kernel)
        state.apply(Saved(str(task), (kernel.id,), content_hash(task.read_bytes()), True))
        assert state.kernels[kernel.id].stale
        task.write_text(original)
        state.apply(Saved(str(task), (kernel.id,), content_hash(task.read_bytes()), True))
        assert not state.kernels[kernel.id].stale and is_current(store, kernel)
    finally:
        task.write_text(original)
        store.close()
