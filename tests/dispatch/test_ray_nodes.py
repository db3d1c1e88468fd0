"""``ktui run --ray`` on a real two-node Ray cluster on this machine: the run folder of a kernel
judged on the second node comes back to the driver's ``.ktui/runs/``, events stream, and the
node runs from the workspace files the driver shipped, not from the driver's paths."""

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import REPO, ktui, make_workspace, parse_events
from test_ray_ship import HELPERS, helped_workspace

from ktui.history.store import Store
from ktui.protocol.job import Options
from ktui.protocol.statedir import run_dir
from ktui.workspace.kernels import discover, state_dir

ray = pytest.importorskip("ray")  # in the `test` extra: CI always has it

from ray.cluster_utils import Cluster  # noqa: E402
from ray_driven import judged  # noqa: E402

from ktui.dispatch.ray.pool import RayPool  # noqa: E402
from ktui.dispatch.runner import WorkerRunner  # noqa: E402
from ktui.dispatch.session import Session  # noqa: E402

pytestmark = pytest.mark.e2e

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


def judged_on_the_second_node(ws: Path, consumers=(), **limits) -> tuple[dict, list]:
    pool = RayPool(resources={SECOND: 1}, **limits)
    try:
        assert len(pool.actors) == 1  # only one node has the resource, once
        place = ray.get(pool.actors[0].ran_on.remote())
        finished = judged(pool, discover([ws / "kernels"]), OPTIONS, consumers)
        place["left_in_scratch"] = sorted(set(os.listdir(place["scratch"])) - {"workspaces"})
        place["workspaces"] = ray.get(pool.actors[0].ran_on.remote())["workspaces"]
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
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--no-audit", "--json", "--no-bench", "--seed", "7",
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


def rung_results(events: list) -> list[tuple[str, str]]:
    return [(e.rung, e.status) for e in events if e.type == "rung_finished"]


def test_a_node_without_the_workspace_judges_a_kernel_and_its_helper_as_a_local_run_does(two_nodes, tmp_path):
    here = helped_workspace(tmp_path / "here")
    local_events: list = []
    session = Session(here, runner=WorkerRunner(), consumers=[local_events.append])
    try:
        [kernel] = discover([here / "kernels"])
        local = session.run(kernel, OPTIONS)
    finally:
        session.close()
    assert local.verdict == "passed", local.message

    ws = helped_workspace(tmp_path / "ws")
    shipped: list = []

    def gone_once_shipped(bundles):
        """The driver has read and shipped the files: from now on the workspace holds none of
        them, so a worker that read the driver's paths could import neither kernel nor helper."""
        shipped.extend(bundles)
        shutil.rmtree(ws / "kernels")
        shutil.rmtree(ws / "references")
        (ws / "add_helpers.py").unlink()

    events: list = []
    pool = RayPool(resources={SECOND: 1}, on_shipped=gone_once_shipped)
    try:
        place = ray.get(pool.actors[0].ran_on.remote())
        [finish] = judged(pool, discover([ws / "kernels"]), OPTIONS, [events.append])
        after = ray.get(pool.actors[0].ran_on.remote())
    finally:
        pool.close()
    assert not (ws / "kernels").exists() and [b.root for b in shipped] == [str(ws)]
    assert finish.verdict == local.verdict, finish.message
    assert rung_results(events) == rung_results(local_events)
    assert place["node_id"] == finish.summary["ran_on"]["node_id"] == two_nodes["second"]
    assert after["workspaces"] == [shipped[0].digest]  # one copy, in the actor's scratch folder
    # the events name the driver's files and run folder, as a local run's do
    [started] = [e for e in events if e.type == "run_started"]
    assert (started.path, started.reference) == (str(ws / "kernels" / "add_helped.py"), str(ws / "references" / "add.py"))
    assert started.run_dir == str(run_dir(state_dir(ws), "add_helped", 1))
    report = (run_dir(state_dir(ws), "add_helped", 1) / "report.json").read_text()
    assert place["scratch"] not in report and str(ws / "kernels" / "add_helped.py") in report
    assert stored_run(ws).verdict == "passed"


def test_an_edited_helper_reaches_the_node_as_a_new_version(two_nodes, tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    pool = RayPool(resources={SECOND: 1})
    try:
        [before] = judged(pool, discover([ws / "kernels"]), OPTIONS)
        (ws / "add_helpers.py").write_text(HELPERS.format(extra=" + 1.0"))  # now wrong by one
        [after] = judged(pool, discover([ws / "kernels"]), OPTIONS)
        place = ray.get(pool.actors[0].ran_on.remote())
        versions = list(pool.shipper.versions)
    finally:
        pool.close()
    assert before.verdict == "passed", before.message
    assert after.verdict == "failed", after.message  # the warm worker used the edited helper
    assert len(versions) == 2 and versions[0] != versions[1]
    assert sorted(place["workspaces"]) == sorted(versions)  # each version written once on the node


def test_what_a_node_could_not_run_ends_its_run_with_the_reason_and_the_pool_goes_on(two_nodes, tmp_path):
    ws = helped_workspace(tmp_path / "ws")
    helped = (ws / "kernels" / "add_helped.py").read_text()
    (ws / "kernels" / "add_lost.py").write_text(helped.replace("from add_helpers import", "from add_helpers_lost import"))
    big = make_workspace(tmp_path / "big", ["add_triton"])
    (big / "data").mkdir()
    (big / "data" / "table.bin").write_bytes(bytes(9000))  # the largest other file is a few KiB
    events: list = []
    pool = RayPool(resources={SECOND: 1}, max_workspace_file_bytes=8000)
    try:
        judged(pool, discover([ws / "kernels", big / "kernels"]), OPTIONS, [events.append])
    finally:
        pool.close()
    kernel_of = {e.run_id: e.path for e in events if e.type == "run_started"}
    ends = {Path(kernel_of[e.run_id]).name: e for e in events if e.type == "run_finished"}
    assert ends["add_helped.py"].verdict == "passed"  # its neighbour's refusal stopped nothing
    assert ends["add_lost.py"].verdict == ends["add_triton.py"].verdict == "error"
    assert ends["add_lost.py"].message.startswith(
        "kernels/add_lost.py:5 imports 'add_helpers_lost', which ktui finds neither among the workspace files")
    assert (f"{big / 'data' / 'table.bin'} (9000 B) is too large to ship to a Ray node: a workspace file may be at "
            "most 8000 B") in ends["add_triton.py"].message
    assert stored_run(big).verdict == "error"  # recorded like any run


def test_ray_with_no_address_starts_an_instance_of_its_own_beside_a_cluster_running_here(two_nodes, tmp_path):
    """With no address Ray joins the cluster this machine runs (as ``ray start`` made it): ``--ray``
    alone must not, or its ``num_cpus`` is refused and its runs would take that cluster's CPUs."""
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--ray", "kernels/add_triton.py", cwd=ws, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [end] = [e for e in parse_events(proc.stdout) if e["type"] == "run_finished"]
    assert end["verdict"] == "passed", end["message"]
    assert end["summary"]["ran_on"]["node_id"] not in {node["NodeID"] for node in ray.nodes()}
