"""A run is judged by its reference as read before any user code ran (CPU tier).

The parent reads and hashes the reference and the files it needs once, the worker executes those
texts, and the history records their hash: a kernel that rewrites or patches its reference at
import or in a call is judged by the recorded version, and a reference changed during a run makes
``ktui run`` run the kernel again against the new one. ``KTUI_NO_CONFINE=1`` keeps a sandbox out
of the way: these tests are about the snapshot, not about blocking the write.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.dispatch.session import Session
from ktui.history.store import Store
from ktui.protocol.job import Options
from ktui.workspace.kernels import content_hash, kernel_for, reference_hash

pytestmark = pytest.mark.worker

UNCONFINED = {"KTUI_NO_CONFINE": "1"}
ADD = (REPO / "kernels" / "add_triton.py").read_text()


def runs_of(events: list[dict]) -> list[list[dict]]:
    """The events of each run, in order (a kernel run twice has two)."""
    order = [e["run_id"] for e in events if e["type"] == "run_started"]
    return [[e for e in events if e["run_id"] == run_id] for run_id in order]


@pytest.fixture(scope="module")
def hacked(tmp_path_factory):
    root = make_workspace(tmp_path_factory.mktemp("snapshot"), hacks=["patches_reference", "rewrites_reference"])
    original = (root / "references" / "add.py").read_bytes()
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "--no-bench", "kernels/", cwd=root, env=UNCONFINED)
    return root, original, proc, by_kernel(parse_events(proc.stdout))


def test_a_kernel_that_rewrites_its_reference_at_import_is_judged_by_the_recorded_one(hacked):
    root, original, proc, kernels = hacked
    first, second = runs_of(kernels["hack_rewrites_reference"])
    assert first[0]["reference_hash"] == content_hash(original)
    assert finished(first)["verdict"] == "failed", rungs(first)
    assert "mismatch" in rungs(first)["correctness[size=1000]"]["message"] or \
        rungs(first)["correctness[size=1000]"]["status"] == "failed"
    changed = finished(first)["summary"]["reference_changed"]
    assert changed["recorded"] == content_hash(original) and changed["now"] != changed["recorded"]
    stored = {run.run_id: run for run in Store.of(root / ".ktui").runs("hack_rewrites_reference")}
    assert stored[first[0]["run_id"]].reference_hash == content_hash(original)
    assert stored[first[0]["run_id"]].verdict == "failed"
    # Run again against the rewritten reference, the kernel writes it once more: not a person's edit.
    assert second[0]["reference_hash"] == changed["now"]
    assert finished(second)["verdict"] == "suspicious"
    assert "written again during this second run" in finished(second)["message"]
    assert "add.py changed during the run" in proc.stderr and "running it again" in proc.stderr
    assert proc.returncode == 3


def test_a_kernel_that_patches_its_loaded_reference_at_import_is_suspicious_and_the_patch_undone(hacked):
    events = hacked[3]["hack_patches_reference"]
    r = rungs(events)["pre-checks"]
    assert r["status"] == "suspicious", r
    assert "patched its reference: reference.ref_kernel (restored)" in r["message"]
    assert finished(events)["verdict"] == "suspicious"


def test_a_reference_and_its_module_saved_after_the_snapshot_do_not_judge_that_run(tmp_path):
    # A person's save between the parent's read and the worker's import: the worker judges with
    # the texts the run recorded, and the run says the reference on disk has moved on.
    root = make_workspace(tmp_path / "ws")
    (root / "refmath.py").write_text("def combine(x, y):\n    return x.double() + y.double()\n")
    reference = root / "references" / "add.py"
    reference.write_text(reference.read_text().replace("import torch\n", "import torch\nfrom refmath import combine\n")
                         .replace("(x.double() + y.double())", "combine(x, y)"))
    (root / "kernels" / "add_triton.py").write_text(ADD)
    kernel = kernel_for(root / "kernels" / "add_triton.py")
    recorded = reference_hash(kernel)
    assert recorded != content_hash(reference.read_bytes())  # the module it imports is part of the hash
    session = Session(root)
    try:
        job = session.prepare(kernel, Options(seed=3, benchmark=False))
        assert set(job.reference_modules) == {"refmath"} and job.reference_hash == recorded
        (root / "refmath.py").write_text("def combine(x, y):\n    return x.double() * 0\n")
        reference.write_text(reference.read_text().replace("combine(x, y)", "(x.double() - y.double())"))
        events = list(session.events(job))
    finally:
        session.close()
    done = events[-1]
    assert done.verdict == "passed", [(e.rung, e.message) for e in events if getattr(e, "rung", None)]
    assert done.summary["reference_changed"]["recorded"] == recorded
    assert Store.of(root / ".ktui").latest_run("add_triton").reference_hash == recorded


def test_gpumode_a_call_that_patches_a_constant_of_the_reference_is_suspicious(tmp_path):
    # ALPHA is no function: the tripwire that guards ref_kernel during a call does not restore it.
    problem = tmp_path / "gpumode"
    shutil.copytree(FIXTURES / "gpumode", problem)
    wrong = (problem / "scaleadd" / "submission_wrong.py").read_text()
    (problem / "scaleadd" / "submission.py").write_text(wrong.replace(
        "    x, y, out = data\n",
        "    import sys\n    for name, module in list(sys.modules.items()):\n"
        "        if name.startswith('ktui_user_ref_'):\n            module.ALPHA = 2.0\n    x, y, out = data\n", 1))
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "--no-bench", "gpumode/scaleadd/submission.py", cwd=tmp_path, env=UNCONFINED)
    events = parse_events(proc.stdout)
    r = next(e for e in rungs(events).values() if e["status"] != "ok")
    assert r["status"] == "suspicious", r
    assert "custom_kernel patched its reference: reference.ALPHA (restored)" in r["message"]


def test_gpumode_a_submission_that_rewrites_reference_and_outside_utils_is_judged_by_the_recorded_ones(tmp_path):
    problem = tmp_path / "gpumode"
    shutil.copytree(FIXTURES / "gpumode", problem)
    folder = problem / "scaleadd"
    kernel_path = folder / "submission.py"
    wrong = (folder / "submission_wrong.py").read_text()
    kernel_path.write_text(
        "from pathlib import Path\n"
        "_here = Path(__file__).resolve().parent\n"
        "_ref = _here / 'reference.py'\n"
        "_ref.write_text(_ref.read_text().replace('ALPHA = 2.5', 'ALPHA = 2.0'))\n"
        "_utils = _here.parent / 'utils.py'\n"
        "_utils.write_text(_utils.read_text().replace('if reasons:', 'if False:'))\n" + wrong)
    recorded = reference_hash(kernel_for(kernel_path))
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "--no-bench", "gpumode/scaleadd/submission.py", cwd=tmp_path, env=UNCONFINED)
    first = runs_of(parse_events(proc.stdout))[0]
    assert first[0]["reference_hash"] == recorded
    assert finished(first)["verdict"] == "failed", rungs(first)
    assert finished(first)["summary"]["reference_changed"]["recorded"] == recorded


def test_kernelbench_a_candidate_that_rewrites_the_model_file_is_judged_by_the_recorded_one(tmp_path):
    root = make_workspace(tmp_path / "ws")
    (root / "kb").mkdir()
    shutil.copy(FIXTURES / "kernelbench" / "scale_shift_relu.py", root / "kb")
    candidate = (FIXTURES / "kernelbench" / "scale_shift_relu_triton.py").read_text()
    # Wrong: no bias. At import it drops the bias from the Model file as well.
    kernel_path = root / "kernels" / "scale_shift_relu_triton.py"
    kernel_path.write_text(
        candidate.replace("tl.maximum(x * w + b, 0.0)", "tl.maximum(x * w, 0.0)")
        + "\n\nfrom pathlib import Path as _Path\n"
        "_model = _Path(__file__).resolve().parents[1] / 'kb' / 'scale_shift_relu.py'\n"
        "_model.write_text(_model.read_text().replace('x * self.weight + self.bias', 'x * self.weight'))\n")
    recorded = reference_hash(kernel_for(kernel_path))
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "--no-bench", "kernels/scale_shift_relu_triton.py", cwd=root, env=UNCONFINED)
    first = runs_of(parse_events(proc.stdout))[0]
    assert first[0]["reference_hash"] == recorded
    assert finished(first)["verdict"] == "failed", rungs(first)
    assert finished(first)["summary"]["reference_changed"]["recorded"] == recorded


def test_a_reference_that_did_not_change_runs_once(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--json", "--seed", "5", "--no-bench", "kernels/add_triton.py", cwd=root, env=UNCONFINED)
    events = parse_events(proc.stdout)
    assert len(runs_of(events)) == 1 and finished(events)["verdict"] == "passed"
    assert "reference_changed" not in finished(events)["summary"]
    assert Path(root / "references" / "add.py").read_bytes() == (REPO / "references" / "add.py").read_bytes()


def test_a_reference_removed_during_the_run_leaves_the_verdict_judged_by_what_was_read(tmp_path):
    # Removed is not changed: there is no newer reference to run against (a Ray node's driver may
    # drop the files once shipped), so the run stands rather than ending with no verdict.
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    kernel = kernel_for(root / "kernels" / "add_triton.py")
    session = Session(root)
    try:
        job = session.prepare(kernel, Options(seed=3, benchmark=False))
        (root / "references" / "add.py").unlink()
        events = list(session.events(job))
    finally:
        session.close()
    assert events[-1].verdict == "passed" and "reference_changed" not in events[-1].summary
