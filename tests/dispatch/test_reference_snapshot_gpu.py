"""On a GPU too, a kernel is judged by its reference as read before any user code ran: one that
rewrites its reference at import fails against the recorded one, one that patches the loaded
reference is suspicious (the CPU tier's cases are in test_reference_snapshot)."""

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.workspace.kernels import content_hash

pytestmark = [pytest.mark.gpu, pytest.mark.worker]


@pytest.fixture(scope="module")
def hacked(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_workspace(tmp_path_factory.mktemp("gpusnapshot"), hacks=["patches_reference", "rewrites_reference"])
    original = (root / "references" / "add.py").read_bytes()
    proc = ktui("run", "--no-audit", "--json", "--seed", "9", "--no-bench", "kernels/", cwd=root, timeout=900,
                env={"KTUI_NO_CONFINE": "1"})
    return original, proc, by_kernel(parse_events(proc.stdout))


def test_a_kernel_that_rewrites_its_reference_fails_against_the_recorded_one_on_the_gpu(hacked):
    original, proc, kernels = hacked
    events = kernels["hack_rewrites_reference"]
    first_run = [e for e in events if e["run_id"] == events[0]["run_id"]]
    assert first_run[0]["tier"] == "gpu" and first_run[0]["reference_hash"] == content_hash(original)
    assert finished(first_run)["verdict"] == "failed", rungs(first_run)
    assert proc.returncode == 3  # the second run, during which it wrote the reference again, is suspicious


def test_a_kernel_that_patches_its_loaded_reference_is_suspicious_on_the_gpu(hacked):
    r = rungs(hacked[2]["hack_patches_reference"])["pre-checks"]
    assert r["status"] == "suspicious" and "patched its reference: reference.ref_kernel" in r["message"]
