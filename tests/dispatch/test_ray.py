"""``ktui run --ray``: many kernels judged in parallel on a real local Ray instance (CPU tier)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, ktui, make_workspace, parse_events
from waits import SAFETY_S, gone

from ktui.dispatch.runner import WorkerRunner
from ktui.dispatch.session import Session
from ktui.history.store import Store
from ktui.protocol.job import Options
from ktui.protocol.processes import descendants
from ktui.workspace.kernels import discover, state_dir

ray = pytest.importorskip("ray")  # in the `test` extra: CI always has it

from ray_driven import judged  # noqa: E402

from ktui.dispatch.ray.pool import RayPool  # noqa: E402

pytestmark = pytest.mark.e2e

SHIPPED = ["add_triton", "softmax_triton"]
# correct, wrong and suspicious ones, chosen among the quick fixtures (the CPU tier is slow)
FIXTURES = ["wrong_values", "softmax_twopass", "wrong_shape", "wrong_dtype", "raises", "launches_nothing"]
OPTIONS = Options(seed=7, benchmark=False)


@pytest.fixture(scope="module")
def local_ray():
    # a new instance of its own ("local"), never another test process's cluster that runs meanwhile
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def address(local_ray) -> str:
    """The module's own Ray instance: ``--ray auto`` would join whichever instance this machine
    started last, another test process's two-node cluster included (tests/dispatch/test_ray_nodes.py)."""
    return local_ray.get_runtime_context().gcs_address


@pytest.fixture(scope="module")
def serial_verdicts(tmp_path_factory):
    """The eight kernels judged one after another by one local warm worker: what Ray must match."""
    ws = make_workspace(tmp_path_factory.mktemp("serial") / "ws", SHIPPED, FIXTURES)
    session = Session(ws, runner=WorkerRunner())
    try:
        return {kernel.id: session.run(kernel, OPTIONS).verdict for kernel in discover([ws / "kernels"])}
    finally:
        session.close()


def history(ws: Path) -> dict[str, list]:
    """Every run the workspace's history holds, per kernel."""
    store = Store.of(state_dir(ws))
    try:
        runs: dict[str, list] = {}
        for run in store.runs():
            runs.setdefault(run.kernel, []).append(run)
        return runs
    finally:
        store.close()


def test_eight_kernels_on_ray_get_the_serial_verdicts_and_all_reach_the_history(address, serial_verdicts, tmp_path):
    ws = make_workspace(tmp_path / "ws", SHIPPED, FIXTURES)
    # the real CLI, joining the module's Ray instance (two CPUs: two actors, each with a warm worker)
    proc = ktui("run", "--no-audit", "--json", "--no-bench", "--seed", "7", "--ray", address, "kernels", cwd=ws, timeout=240)
    assert proc.returncode == 3, proc.stderr  # the worst verdict among them: suspicious
    events = parse_events(proc.stdout)
    kernel_of = {e["run_id"]: e["kernel"] for e in events if e["type"] == "run_started"}
    ends = {kernel_of[e["run_id"]]: e for e in events if e["type"] == "run_finished"}
    assert {"passed", "failed", "suspicious"} <= set(serial_verdicts.values())
    assert {kernel: end["verdict"] for kernel, end in ends.items()} == serial_verdicts
    places = [end["summary"]["ran_on"] for end in ends.values()]
    assert all(place["node"] and place["node_id"] and place["gpu"] is None for place in places)
    runs = history(ws)
    assert all(len(kernel_runs) == 1 for kernel_runs in runs.values())
    assert {kernel: kernel_runs[0].verdict for kernel, kernel_runs in runs.items()} == serial_verdicts
    assert runs["add_triton"][0].summary["ran_on"]["node"]  # the history records where it ran
    assert (state_dir(ws) / "latest").is_dir()  # the report files were written from the same stream


def test_a_killed_actor_gives_one_crashed_run_and_the_others_finish(local_ray, tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"], ["wrong_values", "wrong_shape"])
    pool = RayPool()
    actor_pids = [ray.get(actor.ran_on.remote())["pid"] for actor in pool.actors]
    killed: dict = {}

    def kill_the_third(job, actor):
        """The third job goes to an actor that already ran one: its warm worker is up."""
        killed.setdefault("dispatched", []).append(job.kernel_id)
        if len(killed["dispatched"]) == 3:
            index = next(i for i, a in enumerate(pool.actors) if a is actor)
            killed["kernel"] = job.kernel_id
            killed["workers"] = descendants(actor_pids[index])
            ray.kill(actor, no_restart=True)

    pool.on_dispatch = kill_the_third
    try:
        finished = {run.run_id: run for run in judged(pool, discover([ws / "kernels"]), OPTIONS)}
        assert len(pool.actors) == 2  # a replacement took the dead actor's place
    finally:
        pool.close()
    crashed = [run for run in finished.values() if run.verdict == "crashed"]
    assert len(crashed) == 1
    assert "RayActorError" in crashed[0].message
    verdicts = {kernel: kernel_runs[0].verdict for kernel, kernel_runs in history(ws).items()}
    assert verdicts.pop(killed["kernel"]) == "crashed"
    assert verdicts == {kernel: expected for kernel, expected in
                        {"add_triton": "passed", "wrong_values": "failed", "wrong_shape": "failed"}.items()
                        if kernel != killed["kernel"]}
    assert killed["workers"]  # the dead actor had a warm worker ...
    assert not gone(lambda: [pid for pid in killed["workers"] if _alive(pid)])  # ... which did not outlive it


def test_without_ray_the_flag_says_how_to_install_it(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    hide_ray = ("import sys; sys.modules['ray'] = None; from ktui.cli.main import main; "
                "sys.exit(main(['run', 'kernels/add_triton.py', '--ray']))")
    proc = subprocess.run([sys.executable, "-c", hide_ray], cwd=ws, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2
    assert "pip install -e '.[ray]'" in proc.stderr


@pytest.mark.parametrize("argv", [["run", "--ray", "kernels/"], ["run", "--ray", "kernels/add_triton.py"],
                                  ["watch", "--headless", "--ray", "kernels/"], ["mcp", "--ray", "."]])
def test_ray_with_no_address_before_a_path_takes_it_as_the_kernels_to_run(tmp_path, argv):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    hide_ray = f"import sys; sys.modules['ray'] = None; from ktui.cli.main import main; sys.exit(main({argv!r}))"
    proc = subprocess.run([sys.executable, "-c", hide_ray], cwd=ws, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert "required: paths" not in proc.stderr
    assert "pip install -e '.[ray]'" in proc.stderr  # it got as far as starting Ray


def test_ktui_run_with_no_paths_at_all_says_they_are_required(tmp_path):
    proc = ktui("run", "--ray", cwd=make_workspace(tmp_path / "ws"))
    assert proc.returncode == 2 and "give the kernel files or folders to run" in proc.stderr


def test_an_address_with_nothing_listening_is_refused_at_once(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    proc = ktui("run", "--no-audit", "--ray", "127.0.0.1:1", "kernels/add_triton.py", cwd=ws, timeout=60)
    assert proc.returncode == 2
    assert "could not join the Ray cluster at 127.0.0.1:1" in proc.stderr


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False



@pytest.mark.parametrize("says", [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"SSH-2.0-OpenSSH_9.6\r\n", b""])
def test_an_address_where_something_other_than_ray_listens_is_refused_within_seconds(tmp_path, says):
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    held = []

    def answer() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)  # kept open: a silent server never hangs up
            if says:
                conn.sendall(says)

    threading.Thread(target=answer, daemon=True).start()
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    try:  # Ray alone waited minutes; ktui's answer, within the limit, is its own
        proc = ktui("run", "--no-audit", "--ray", f"127.0.0.1:{port}", "kernels/add_triton.py", cwd=ws, timeout=SAFETY_S)
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert proc.returncode == 2, proc.stderr
    assert f"what listens at 127.0.0.1:{port} is not Ray" in proc.stderr
    assert (repr(says[:20])[2:-1] if says else "said nothing") in proc.stderr


def test_a_real_ray_cluster_passes_the_address_probe(local_ray):
    from ktui.dispatch.ray.pool import _reachable

    _reachable(local_ray.get_runtime_context().gcs_address)  # raises where the probe would refuse Ray


WAITS_FOREVER = '''
import time

import torch
import triton
import triton.language as tl

REFERENCE = "add"


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def custom_kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    time.sleep(600)  # until the test cancels its run
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''


def test_a_cancelled_run_on_an_actor_ends_cancelled_and_the_actor_runs_the_next_kernel(local_ray, tmp_path):
    import threading

    from ktui.dispatch.queue import Batch, RunQueue

    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    (ws / "kernels" / "waits.py").write_text(WAITS_FOREVER)
    kernels = {k.id: k for k in discover([ws / "kernels"])}
    pool = RayPool(num_cpus=1)  # one actor: the next kernel runs where the cancelled one ran
    [actor_pid] = [ray.get(actor.ran_on.remote())["pid"] for actor in pool.actors]
    rung_done = threading.Event()
    queue = RunQueue(Session(ws, runner=pool.runners[0]), OPTIONS, listener=lambda item: None, warm_up=False,
                     runners=pool.runners)
    queue.start()
    try:
        handle = Batch(heard=lambda event: rung_done.set() if event.type == "rung_finished" else None)
        verdicts: list = []
        waiting = threading.Thread(target=lambda: verdicts.extend(queue.batch([kernels["waits"]], OPTIONS, handle=handle)))
        waiting.start()
        assert rung_done.wait(120), "the run never reached its actor's worker"
        workers = descendants(actor_pid)
        queue.cancel("cancelled: the test stopped it", handle)
        waiting.join(SAFETY_S)
        assert not waiting.is_alive()  # not the kernel's 600 s
        [(_, finish)] = verdicts
        assert finish.verdict == "cancelled" and "the test stopped it" in finish.message, finish.message
        assert workers and not [pid for pid in workers if _alive(pid)]  # the worker running it was killed
        [(_, after)] = list(queue.batch([kernels["add_triton"]], OPTIONS))
        assert after.verdict == "passed", after.message
        assert after.summary["ran_on"]["node_id"] == finish.summary["ran_on"]["node_id"]
    finally:
        queue.close()
        pool.close()


def test_ktui_run_ray_while_serve_ray_owns_the_workspace_runs_through_its_actors(address, tmp_path):
    import os
    import signal

    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    errors = tmp_path / "serve.err"  # a file, not a pipe nobody reads: what the owner said if it died
    with errors.open("w") as err:
        serve = subprocess.Popen([sys.executable, "-m", "ktui", "serve", "--ray", address], cwd=ws, env=env,
                                 stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    try:
        assert f"(Ray {address})" in serve.stdout.readline(), errors.read_text()[-3000:]
        proc = ktui("run", "--no-audit", "--json", "--no-bench", "--ray", address, "kernels/add_triton.py", cwd=ws,
                    timeout=240)
        assert proc.returncode == 0, f"{proc.stderr}\n--- ktui serve's stderr:\n{errors.read_text()[-3000:]}"
        [end] = [e for e in parse_events(proc.stdout) if e["type"] == "run_finished"]
        assert end["verdict"] == "passed" and end["summary"]["ran_on"]["node_id"]
        assert not descendants(serve.pid) or all("ktui.worker.main" not in _cmdline(pid) for pid in descendants(serve.pid))
        refused = ktui("run", "--no-audit", "--no-bench", "--cpu", "kernels/add_triton.py", cwd=ws, timeout=60)
        assert refused.returncode == 2 and f"runs on Ray {address}, not this machine (CPU tier)" in refused.stderr
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
    assert history(ws)["add_triton"][0].summary["ran_on"]["node_id"] == end["summary"]["ran_on"]["node_id"]


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


GPUS_REFUSED = "ktui: --gpus picks GPUs of this host: with --ray, Ray places the runs (one worker per GPU it has)"
REMOTE_REFUSED = "ktui: --remote runs on one host over ssh: with --ray, Ray places the runs"


TWO_PLACEMENTS = [
    *[([command, "--ray", "--gpus", "0"], GPUS_REFUSED) for command in ("serve", "watch", "mcp")],
    (["run", "kernels/add_triton.py", "--ray", "--gpus", "0"], GPUS_REFUSED),
    *[([command, "--ray", "--remote", "gpu1"], REMOTE_REFUSED) for command in ("watch", "mcp")],  # serve has no --remote
    (["run", "kernels/add_triton.py", "--ray", "--remote", "gpu1"], REMOTE_REFUSED),
]


@pytest.mark.parametrize("argv, says", TWO_PLACEMENTS, ids=[" ".join(argv) for argv, _ in TWO_PLACEMENTS])
def test_ray_with_another_placement_is_refused_in_one_line_by_every_surface(tmp_path, argv, says):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    proc = ktui(*argv, *(["--headless"] if argv[0] == "watch" else []), cwd=ws, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [says]


def test_watch_with_a_folder_and_another_after_ray_is_refused(tmp_path):
    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    proc = ktui("watch", str(ws), "--headless", "--ray", "kernels/", cwd=ws, timeout=60)
    assert proc.returncode == 2 and f"one folder at a time, not {ws} and kernels" in proc.stderr


def _new_workers(before: set[int]) -> list[int]:
    """The warm workers (``ktui.worker.main``) under this test process started since ``before``:
    the module's Ray instance starts each actor's worker."""
    return [pid for pid in descendants(os.getpid()) if pid not in before and "ktui.worker.main" in _cmdline(pid)]


def test_watch_headless_on_ray_gives_a_verdict_and_a_save_runs_it_again(address, tmp_path):
    import json

    from headless import Headless

    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    kernel = ws / "kernels" / "add_triton.py"
    before = set(descendants(os.getpid()))
    watch = Headless(ws, "--no-audit", "--no-bench", "--ray", address)
    until = watch.until
    try:
        first = until(lambda e: e["type"] == "run_finished")  # the catch-up run, on an actor
        assert first["verdict"] == "passed", first["message"]
        assert first["summary"]["ran_on"]["node_id"]
        kernel.write_text(kernel.read_text().replace("num_warps=4", "num_warps=8"))
        started = until(lambda e: e["type"] == "run_started")
        assert started["version"] == 2
        end = until(lambda e: e["type"] == "run_finished")
        assert end["verdict"] == "passed" and end["summary"]["ran_on"]["node_id"]
        latest = json.loads((state_dir(ws) / "latest" / "add_triton.json").read_text())
        assert latest["version"] == 2 and latest["verdict"] == "passed"
    finally:
        code = watch.stop()
    assert code == 0, watch.proc.stderr.read()
    assert [run.version for run in history(ws)["add_triton"]] == [2, 1]
    assert gone(lambda: _new_workers(before)) == []  # the watch's actors ended with it, their workers too


def test_mcp_on_ray_answers_a_run_call_through_the_sdk_client(address, tmp_path):
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    ws = make_workspace(tmp_path / "ws", ["add_triton"])
    before = set(descendants(os.getpid()))
    params = StdioServerParameters(command=sys.executable, args=["-m", "ktui", "mcp", str(ws), "--ray", address],
                                   env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=str(ws))

    async def main() -> dict:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("run", {"paths": ["kernels/add_triton.py"], "seed": 1, "no_bench": True})
                assert not result.is_error, result.content[0].text
                return result.structured_content

    answer = anyio.run(main)
    [first] = answer["kernels"]
    assert (first["kernel"], first["verdict"]) == ("add_triton", "passed") and answer["all_passed"] is True
    assert first["summary"]["ran_on"]["node_id"]  # an actor of the Ray instance ran it
    assert gone(lambda: _new_workers(before)) == []  # the server's actors ended with it, their workers too
