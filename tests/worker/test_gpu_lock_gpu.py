"""Two workspaces running on one GPU at once take turns (``ktui.worker.timing.gpu_lock``): neither's
timing holds the other's kernels (its benchmarks or its checks), so neither calls a correct kernel
suspicious.

Run on a CUDA machine with ``python -m pytest -m gpu tests/worker/test_gpu_lock_gpu.py``.
"""

import subprocess
import sys

import pytest
from conftest import by_kernel, child_env, make_workspace, parse_events, rungs

pytestmark = [pytest.mark.gpu, pytest.mark.worker]

KERNELS = ["add_triton", "softmax_triton"]


@pytest.fixture(scope="module")
def two_runs_at_once(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    procs = []
    for seed in (1, 2):  # two workspaces: two owners, one GPU
        root = make_workspace(tmp_path_factory.mktemp(f"ws{seed}"), kernels=KERNELS)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "ktui", "run", "--no-audit", "--json", "--seed", str(seed), "--bench-time", "2",
             *[f"kernels/{k}.py" for k in KERNELS]],
            cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()))
    done = [p.communicate(timeout=900) for p in procs]
    return [(p.returncode, out, err, by_kernel(parse_events(out))) for p, (out, err) in zip(procs, done)]


def benches(kernels):
    return {(k, name): r for k, events in kernels.items() for name, r in rungs(events).items()
            if name.startswith("benchmark[")}


def test_two_workspaces_running_at_once_take_turns_and_both_pass(two_runs_at_once):
    waited = []
    for code, out, err, kernels in two_runs_at_once:
        assert code == 0, out[-3000:] + err[-3000:]
        timed = benches(kernels)
        assert len(timed) == 6, sorted(timed)
        bad = {k: (r["status"], r["message"]) for k, r in timed.items() if r["status"] != "ok"}
        assert not bad, bad
        every = [r for events in kernels.values() for r in rungs(events).values()]
        assert not [(r["rung"], r["figures"]["gpu_lock"]) for r in every if "gpu_lock" in r.get("figures", {})]
        waited += [r.get("figures", {}).get("gpu_wait_s", 0.0) for r in every]
    # The two runs (about 15 s of benchmarks each) overlap in time: one waited for the other's turn.
    assert max(waited) > 0.05, waited
