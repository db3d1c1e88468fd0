"""``ktui run --ray`` on a real two-node Ray cluster on this machine: the run folder of a kernel
judged on the second node comes back to the driver's ``.ktui/runs/``, and events stream."""

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, make_workspace

from ktui.history.store import Store
from ktui.protocol.job import Options
from ktui.protocol.statedir import run_dir
from ktui.workspace.kernels import discover, state_dir

ray = pytest.importorskip("ray")  # in the `test` extra: CI always has it

from ray.cluster_utils import Cluster  # noqa: E402

from ktui.run.ray_pool import RayPool, evaluate  # noqa: E402

SECOND = "ktui_second_node"  # a resource only the second node has: an actor asking for it runs there
OPTIONS = Options(seed=7, benchmark=False)


@pytest.fixture(scope="module")
def two_nodes():
    """A head node and a second node, one CPU each; the second one's id."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        second = cluster.add_node(num_cpus=1, resources={SECOND: 1})
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
        try:
            yield {"address": cluster.address, "second": second.node_id,
                   "driver": ray.get_runtime_context().get_node_id()}
        finally:
            ray.shutdown()
    finally:
        cluster.shutdown()


def judged_on_the_second_node(ws: Path, **limits) -> tuple[dict, list]:
    pool = RayPool(resources={SECOND: 1}, **limits)
    try:
        assert len(pool.actors) == 1  # only one node has the resource, once
        place = ray.get(pool.actors[0].ran_on.remote())
        finished = evaluate(pool, discover([ws / "kernels"]), OPTIONS)
        place["left_in_scratch"] = sorted(os.listdir(place["scratch"]))
    finally:
        pool.close()
    return place, finished


def stored_run(ws: Path):
    store = Store.of(state_dir(ws))
    try:
        [run] = store.runs()
        return run
    finally:
        store.close()


def test_a_kernel_judged_on_the_second_node_has_its_dumps_in_the_local_run_folder(two_nodes, tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    place, [finish] = judged_on_the_second_node(ws)
    assert place["node_id"] == two_nodes["second"] != two_nodes["driver"]
    assert finish.verdict == "passed", finish.message
    assert finish.summary["ran_on"]["node_id"] == two_nodes["second"]
    # the actor's worker wrote into its own node's scratch folder, emptied once the run came back
    assert Path(ws) not in Path(place["scratch"]).parents
    assert place["left_in_scratch"] == []
    local = run_dir(state_dir(ws), "add_triton", 1)
    names = {p.name for p in local.iterdir()}
    assert {"add_kernel.ttir", "add_kernel.ptx", "add_kernel.cubin", "add_kernel.sass", "resources.json",
            "report.json", "source.py"} <= names
    assert "add_kernel" in json.loads((local / "resources.json").read_text())
    run = stored_run(ws)
    assert run.summary["ran_on"]["node_id"] == two_nodes["second"]  # the history names the second node
    assert run.run_dir == str(local)
    report = json.loads((local / "report.json").read_text())
    dumps = next(r for r in report["rungs"] if r["rung"] == "dumps")
    assert dumps["figures"]["dir"] == str(local)  # the events name the local folder, never the scratch one
    assert place["scratch"] not in (local / "report.json").read_text()


def test_a_file_over_the_limit_stays_on_its_node_and_the_run_says_so(two_nodes, tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    _, [finish] = judged_on_the_second_node(ws, max_file_bytes=2000)
    local = run_dir(state_dir(ws), "add_triton", 1)
    assert (local / "resources.json").is_file()  # a few hundred bytes: shipped
    assert not (local / "add_kernel.cubin").exists()  # kilobytes: over the limit, not written here
    assert finish.verdict == "passed"  # the judgement stands; only the file stayed behind
    cubin_reason = next(r for r in finish.summary["not_shipped"] if r.startswith("add_kernel.cubin"))
    assert "was not shipped back from the Ray node that ran it: a file may be at most 2000 B" in cubin_reason
    assert two_nodes["second"][:12] in cubin_reason
    assert cubin_reason in finish.message


SLOW_KERNEL = '''
import os
import time

import torch
import triton
import triton.language as tl

REFERENCE = "add"
GO = {go!r}


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def custom_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    waited = 0.0
    while not os.path.exists(GO):  # until the test has read the first rung's event
        if waited > 120:
            raise RuntimeError("the go file never came")
        time.sleep(0.05)
        waited += 0.05
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''


def test_the_first_rung_reaches_json_while_the_run_still_waits_on_it(two_nodes, tmp_path):
    ws = make_workspace(tmp_path / "ws")
    go = tmp_path / "go"
    (ws / "kernels" / "slow_add.py").write_text(SLOW_KERNEL.format(go=str(go)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--json", "--no-bench", "--seed", "7",
                             "--ray", two_nodes["address"], "kernels"], cwd=ws, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    try:
        before_go = []
        while not any(e["type"] == "rung_finished" for e in before_go):
            line = lines.get(timeout=300)
            assert line is not None, f"the run ended before any rung's event: {before_go} {proc.stderr.read()}"
            before_go.append(json.loads(line))
        # the kernel cannot finish before the go file exists: this event came while it waited
        assert [e["type"] for e in before_go if e["type"] == "run_finished"] == []
        assert before_go[-1]["rung"] == "pre-checks"
        go.touch()
        after_go = []
        while (line := lines.get(timeout=300)) is not None:
            after_go.append(json.loads(line))
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ends = [e for e in after_go if e["type"] == "run_finished"]
    assert len(ends) == 1 and ends[0]["verdict"] == "passed", ends
    assert next(e["rung"] for e in after_go if e["type"] == "rung_finished") == "compile"  # the rest came after
