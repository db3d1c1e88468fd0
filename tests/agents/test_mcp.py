"""``ktui mcp``: the real server over stdio, driven by the MCP SDK's own client, on the CPU tier."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import uuid
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from conftest import REPO, child_env, ktui, make_workspace
from leftovers import tagged
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from waits import SAFETY_S

pytestmark = pytest.mark.worker

TOOLS = {"run", "verdict", "latest", "history", "diff", "profile", "sanitize", "context_search", "dump", "hotspots", "audit",
         "output", "kernels", "pin", "calibrate"}
FIXTURES = Path(__file__).parent.parent / "fixtures" / "hotspots"


@asynccontextmanager
async def connect(workspace: Path, tag: str = "", command: list[str] | None = None, env: dict | None = None):
    """A session with ``python -m ktui mcp WORKSPACE``; ``tag`` marks its processes (and the worker's)."""
    argv = command or [sys.executable, "-m", "ktui", "mcp", str(workspace), "--cpu"]
    # The SDK starts the server with a few variables of ours only: the session's private user folder
    # and the one-shot runs (no daemon) are passed on by name.
    session = {name: os.environ[name] for name in ("KTUI_USER_DIR", "KTUI_NO_DAEMON") if name in os.environ}
    env = {"PYTHONPATH": str(REPO), "KTUI_MCP_TEST_TAG": tag or uuid.uuid4().hex, **session, **(env or {})}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(workspace))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments) -> dict:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error_of(session: ClientSession, tool: str, **arguments) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text





def tagged_processes(tag: str) -> list[int]:
    """Live processes started under ``tag``: the server, its worker, what user code spawned."""
    return tagged("KTUI_MCP_TEST_TAG", tag)

def test_server_lists_the_loops_tools_and_refuses_arguments_they_do_not_take(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    async def main():
        async with connect(ws) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            assert tools["run"].input_schema["required"] == ["paths"]
            assert "remote" not in tools["run"].input_schema["properties"]
            assert all(t.input_schema.get("additionalProperties") is False for t in tools.values())
            assert set(tools["dump"].input_schema["properties"]["kind"]["enum"]) >= {"ptx", "sass", "ttir"}

    anyio.run(main)


def test_an_agent_runs_the_whole_loop_on_the_cpu_tier(tmp_path):
    """run → latest → history → dump, then an edit, run again and diff the two versions."""
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    kernel = ws / "kernels" / "add_triton.py"

    async def main():
        async with connect(ws) as session:
            progress: list[str] = []

            async def on_progress(done, total, message):
                progress.append(message)

            result = await session.call_tool("run", {"paths": ["kernels/add_triton.py"], "seed": 1},
                                             progress_callback=on_progress)
            assert not result.is_error, result.content[0].text
            first = result.structured_content["kernels"][0]
            assert result.structured_content["all_passed"] is True
            assert (first["kernel"], first["version"], first["verdict"], first["tier"]) == ("add_triton", 1, "passed", "cpu")
            assert first["first_failure"] is None and first["summary"]["correct"] == [5, 5]
            assert first["run_dir"] == ".ktui/runs/add_triton/1" and first["path"] == "kernels/add_triton.py"
            assert any("[correctness[size=1000]] ok" in m for m in progress) and progress[-1] == "finished: passed"

            latest = await call(session, "latest", kernel="add_triton")
            assert latest["verdict"] == "passed" and latest["stale"] is False
            statuses = {r["rung"]: r["status"] for r in latest["rungs"]}
            assert statuses["integrity"] == statuses["dumps"] == statuses["correctness[size=1000]"] == "ok", statuses

            page = await call(session, "dump", kernel="kernels/add_triton.py", kind="ptx", max_chars=300)
            assert page["function"] == "add_kernel" and len(page["text"]) == 300 and page["next_offset"] == 300
            rest = await call(session, "dump", kernel="add_triton", kind="ptx", offset=page["next_offset"],
                              max_chars=100_000)
            ptx = (ws / ".ktui" / "runs" / "add_triton" / "1" / "add_kernel.ptx").read_text()
            assert page["text"] + rest["text"] == ptx and rest["next_offset"] is None

            hot = await call(session, "hotspots", kernel="add_triton", top=50)
            (fn,) = hot["static"]
            assert hot["version"] == 1 and hot["measured"] is None and "`profile` it on a GPU" in hot["note"]
            source = kernel.read_text().splitlines()
            loads = [x for x in fn["lines"] if x["counts"].get("global_load")]
            assert loads and all("tl.load(" in source[x["line"] - 1] for x in loads)
            assert all(x["at"] == f"add_triton.py:{x['line']}" for x in fn["lines"])
            totals = [x["total"] for x in fn["lines"]]
            assert totals == sorted(totals, reverse=True)
            (top,) = (await call(session, "hotspots", kernel="add_triton", top=1))["static"][0]["lines"]
            assert top == fn["lines"][0]

            kernel.write_text(kernel.read_text().replace("num_warps=4", "num_warps=8"))
            assert (await call(session, "latest", kernel="add_triton"))["stale"] is True
            second = (await call(session, "run", paths=["kernels/"], no_bench=True))["kernels"][0]
            assert (second["version"], second["verdict"]) == (2, "passed")

            history = await call(session, "history", kernel="add_triton", limit=5)
            assert [r["version"] for r in history["runs"]] == [2, 1]
            diff = await call(session, "diff", kernel="add_triton")
            assert (diff["base_version"], diff["new_version"]) == (1, 2) and diff["functions"]

    anyio.run(main)


def test_a_failing_kernel_answers_with_its_first_failure_at_the_line(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["raises", "wrong_values"])

    async def main():
        async with connect(ws) as session:
            out = await call(session, "run", paths=["kernels/raises.py", "kernels/wrong_values.py"], no_bench=True)
            raises, wrong = out["kernels"]
            assert out["all_passed"] is False
            assert raises["verdict"] == "failed"
            failure = raises["first_failure"]
            assert (failure["rung"], failure["error_type"], failure["line"]) == ("run", "KeyError", 19)
            assert failure["where"] == "kernels/raises.py:19"  # as the agent names it
            assert '>19 |     scale = {"x": 1.0}["y"]' in failure["excerpt"]
            assert wrong["verdict"] == "failed"
            # 1e-3 too much fails every shape but, on a draw where the one element is large, the size-1
            # shape (its tolerance grows with the reference): the first failure is a correctness rung
            assert wrong["first_failure"]["rung"].startswith("correctness[size="), wrong["first_failure"]
            assert "beyond atol" in wrong["first_failure"]["message"]

    anyio.run(main)


def test_a_wrong_output_is_said_where_by_run_and_drawn_by_latest_and_dump(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["tail_mask_missing"])
    where = "never written: cols 112–114 of every row (the last 3 columns)"

    async def main():
        async with connect(ws) as session:
            ran = (await call(session, "run", paths=["kernels/tail_mask_missing.py"], no_bench=True, seed=1,
                              audit=False))["kernels"][0]
            assert ran["first_failure"]["where_wrong"] == where
            assert "error_map" not in ran["first_failure"]  # the one line; the grid is latest's and dump's
            latest = await call(session, "latest", kernel="tail_mask_missing")
            grid = latest["first_failure"]["error_map"]["grid"]
            assert latest["first_failure"]["error_map"]["description"] == where
            # cells of 2 columns: the last two (cols 112-113, and 114 alone) wholly never written
            assert all(line.endswith("II") and set(line[:-2]) == {"."} for line in grid), grid
            assert next(r for r in latest["rungs"] if r["rung"] == ran["first_failure"]["rung"])["where_wrong"] == where
            drawn = await call(session, "dump", kernel="tail_mask_missing", kind="error_map")
            assert drawn["text"].splitlines()[:2] == [f"[{ran['first_failure']['rung']}] failed", where]
            assert "384 never written" in drawn["text"] and drawn["maps"][0]["grid"] == grid

    anyio.run(main)


def test_a_cutedsl_kernel_on_the_cpu_tier_answers_compiled_not_passed(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_cutedsl"])

    async def main():
        async with connect(ws) as session:
            out = await call(session, "run", paths=["kernels/add_cutedsl.py"], no_bench=True)
            (only,) = out["kernels"]
            assert only["verdict"] == "compiled" and out["all_passed"] is False
            assert out["compiled"] == ["add_cutedsl"] and "not run" in out["not_run"]
            assert only["summary"]["compile_only"] == "CPU tier: CuTeDSL compiled for sm_90a only, not run"
            assert (await call(session, "latest", kernel="add_cutedsl"))["verdict"] == "compiled"

    anyio.run(main)


def test_cancelling_a_hanging_run_kills_the_worker_and_leaves_no_process(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["hang"])
    tag = uuid.uuid4().hex

    async def main():
        async with connect(ws, tag=tag) as session:
            started = anyio.Event()

            async def on_progress(done, total, message):
                if "started" in message:
                    started.set()

            async with anyio.create_task_group() as tg:
                async def run_it():
                    await session.call_tool("run", {"paths": ["kernels/hang.py"]}, progress_callback=on_progress)

                tg.start_soon(run_it)
                with anyio.fail_after(120):
                    await started.wait()
                await anyio.sleep(1.0)  # the worker is now spinning inside custom_kernel
                assert len(tagged_processes(tag)) >= 2  # the server and its worker
                tg.cancel_scope.cancel()  # the client sends notifications/cancelled
            # The client stops waiting at once; the server kills the worker, then records the run.
            reports = ws / ".ktui" / "runs" / "hang" / "1" / "report.json"
            deadline = time.monotonic() + SAFETY_S
            while (len(tagged_processes(tag)) > 1 or not reports.is_file()) and time.monotonic() < deadline:
                await anyio.sleep(0.2)
            assert len(tagged_processes(tag)) == 1  # only the server is left, and it still answers
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
            report = json.loads(reports.read_text())
            assert report["verdict"] == "cancelled" and report["message"].startswith("cancelled by the client")
        deadline = time.monotonic() + SAFETY_S
        while tagged_processes(tag) and time.monotonic() < deadline:
            await anyio.sleep(0.2)
        assert tagged_processes(tag) == []

    anyio.run(main)


def test_a_bad_call_is_a_clear_error_result_and_the_server_keeps_serving(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (tmp_path / "outside.py").write_text("REFERENCE = 'add'\n")

    async def main():
        async with connect(ws) as session:
            assert "remote" in await error_of(session, "run", paths=["kernels/add_triton.py"], remote=True)
            assert "outside the workspace" in await error_of(session, "run", paths=[str(tmp_path / "outside.py")])
            assert "outside the workspace" in await error_of(session, "latest", kernel="../outside.py")
            assert "no such file" in await error_of(session, "history", kernel="kernels/nope.py")
            assert "paths" in await error_of(session, "run", paths=[])
            assert "no runs recorded yet" in await error_of(session, "latest", kernel="add_triton")
            assert "no stored versions" in await error_of(session, "dump", kernel="add_triton", kind="ptx")
            assert "kind" in await error_of(session, "dump", kernel="add_triton", kind="exe")
            assert "context" in await error_of(session, "context_search", query="make_layout")
            assert "limit" in await error_of(session, "history", kernel="add_triton", limit=0)
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS

    anyio.run(main)


def test_init_writes_client_configurations_that_start_this_server(tmp_path):
    assert ktui("init", "ws", cwd=tmp_path).returncode == 0
    ws = tmp_path / "ws"
    claude = json.loads((ws / ".mcp.json").read_text())["mcpServers"]["ktui"]
    cursor = json.loads((ws / ".cursor" / "mcp.json").read_text())["mcpServers"]["ktui"]
    codex = (ws / ".codex" / "config.toml").read_text()
    assert (claude["command"], claude["args"]) == ("ktui", ["mcp", "."])  # committed: portable
    # per machine: the interpreter that ran init, so PATH need not hold `ktui`
    assert (cursor["command"], cursor["args"]) == (sys.executable, ["-m", "ktui", "mcp", "${workspaceFolder}"])
    assert "[mcp_servers.ktui]" in codex and f"command = {json.dumps(sys.executable)}" in codex
    assert 'args = ["-m", "ktui", "mcp", "."]' in codex
    skill = (ws / ".claude" / "skills" / "ktui-loop" / "SKILL.md").read_text()
    for needed in ("name: ktui-loop", "`run`", "first failure", "`diff`", "`profile`", "roofline", "`audit`", "`output`",
                   "Codex", "Cursor", "ktui run --json",
                   "Never edit `references/`"):
        assert needed in skill, needed

    async def main():  # Codex's command as written, then Claude Code's with this interpreter standing in for `ktui`
        for command in ([sys.executable, "-m", "ktui", "mcp", "."], [sys.executable, "-m", "ktui", *claude["args"]]):
            async with connect(ws, command=command, env={"PATH": "/usr/bin:/bin"}) as session:
                assert {t.name for t in (await session.list_tools()).tools} == TOOLS

    anyio.run(main)


SYSTEM_TOOLS = [Path("/usr/local/cuda/bin/ncu"), Path("/usr/local/cuda/bin/compute-sanitizer"),
                *Path("/opt/nvidia").glob("nsight-compute/*/ncu")]
# A kernel whose loading never ends: it waits on a stand-in for ncu, a script that sleeps. On the
# CPU tier the quick no-GPU check answers before anything starts; with it skipped, the pre-flight
# refuses before ncu starts, so the hang is staged where the pre-flight loads the kernel: like ncu
# and its target, that process runs in a session of its own under `ktui profile`.
STUCK_KERNEL = """import subprocess

REFERENCE = "add"
subprocess.run(["ktui-standin-tool"])


def custom_kernel(x, y):
    return x + y
"""


def _script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _path_with(bin_dir: Path) -> dict:
    """PATH with ``bin_dir``, the Python in use and the system folders: no ncu, no compute-sanitizer."""
    return {"PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
            "CUDA_HOME": "", "CUDA_PATH": ""}


def stuck_to_load(ws: Path, bin_dir: Path) -> Path:
    """``kernels/stuck_triton.py``, whose loading lasts ten minutes (it waits on a stand-in that
    sleeps), and the file the stand-in touches once it is started: a call that answers without
    waiting for it, and leaves no such file, loaded nothing."""
    (ws / "kernels" / "stuck_triton.py").write_text(STUCK_KERNEL)
    started = ws / ".ktui" / "runs" / "standin-started"  # user code is confined: it writes only beneath runs/
    _script(bin_dir, "ktui-standin-tool", f"touch {started}\nsleep 600\n")
    return started


def _stuck_workspace(tmp_path: Path) -> tuple[Path, dict, Path]:
    ws = make_workspace(tmp_path / "ws")
    started = stuck_to_load(ws, tmp_path / "bin")
    _script(tmp_path / "bin", "ncu", "sleep 600\n")
    # the quick no-GPU check skipped, so the pre-flight runs (and hangs) on this CPU machine
    return ws, {**_path_with(tmp_path / "bin"), "KTUI_SKIP_GPU_CHECK": "1"}, started


async def _wait_for(condition, timeout_s: float = SAFETY_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        await anyio.sleep(0.2)


def test_cancelling_a_hanging_profile_kills_its_process_groups_and_the_server_keeps_serving(tmp_path):
    ws, env, started = _stuck_workspace(tmp_path)
    tag = uuid.uuid4().hex

    async def main():
        async with connect(ws, tag=tag, env=env) as session:
            progress: list[str] = []

            async def on_progress(done, total, message):
                progress.append(message)

            async with anyio.create_task_group() as tg:
                async def profile_it():
                    await session.call_tool("profile", {"kernel": "stuck_triton"}, progress_callback=on_progress)

                tg.start_soon(profile_it)
                with anyio.fail_after(120):
                    while not started.exists():
                        await anyio.sleep(0.2)
                # the server, ktui profile, the pre-flight's target, the stand-in's sh and its sleep
                # (sh touches the marker just before it starts sleep)
                await _wait_for(lambda: len(tagged_processes(tag)) >= 5)
                assert len(tagged_processes(tag)) >= 5
                tg.cancel_scope.cancel()  # the client sends notifications/cancelled
            await _wait_for(lambda: len(tagged_processes(tag)) <= 1)
            assert len(tagged_processes(tag)) == 1  # only the server is left, and it still answers
            assert progress[:2] == ["starting ktui profile", "loading stuck_triton v1"]
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        await _wait_for(lambda: not tagged_processes(tag))
        assert tagged_processes(tag) == []

    anyio.run(main)


def test_a_profile_in_flight_when_the_client_goes_away_leaves_no_process(tmp_path):
    ws, env, started = _stuck_workspace(tmp_path)
    tag = uuid.uuid4().hex

    async def main():
        async with anyio.create_task_group() as tg, connect(ws, tag=tag, env=env) as session:
            async def profile_it():
                with pytest.raises(MCPError, match="Connection closed"):
                    await session.call_tool("profile", {"kernel": "stuck_triton"})

            tg.start_soon(profile_it)
            with anyio.fail_after(120):
                while not started.exists():
                    await anyio.sleep(0.2)
            await _wait_for(lambda: len(tagged_processes(tag)) >= 5)  # sh starts sleep just after the marker
            assert len(tagged_processes(tag)) >= 5
        await _wait_for(lambda: not tagged_processes(tag))
        assert tagged_processes(tag) == []

    anyio.run(main)


def test_profile_and_sanitize_on_the_cpu_tier_are_clear_error_results(tmp_path):
    if any(p.exists() for p in SYSTEM_TOOLS):
        pytest.skip("this machine has NVIDIA's tools installed")
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    marker = tmp_path / "ncu-was-started"
    ncu = _script(tmp_path / "tools", "ncu", f"touch {marker}\nexit 0\n")

    async def main():
        async with connect(ws, env=_path_with(tmp_path / "bin")) as session:
            assert "ncu (Nsight Compute) is not installed or not found" in await error_of(session, "profile",
                                                                                            kernel="add_triton")
            assert "compute-sanitizer is not installed or not found" in await error_of(session, "sanitize",
                                                                                      kernel="add_triton")
        loaded = stuck_to_load(ws, tmp_path / "bin")
        async with connect(ws, env={**_path_with(tmp_path / "bin"), "KTUI_NCU": str(ncu)}) as session:
            with anyio.fail_after(SAFETY_S):  # loading the kernel would take ten minutes
                message = await error_of(session, "profile", kernel="kernels/stuck_triton.py")
            assert message.startswith("no GPU: ncu profiling needs a CUDA GPU"), message
            assert "`run` checks here" in message and "`ktui run`" not in message  # the tools' words
            assert "/dev/nvidia0" in message and not loaded.exists()  # nothing loaded first
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        assert not marker.exists()  # the pre-flight answered; ncu never ran

    anyio.run(main)


def test_history_answers_with_each_shape_s_figures_and_the_stop_decision(tmp_path):
    from ktui.history.store import Store
    from ktui.protocol.events import RunFinished, RunStarted
    from ktui.workspace.kernels import state_dir

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    # add_triton's H200 fractions (issue 29, a 3.5 µs launch floor: tests/measure/test_launch_floor.py)
    shapes = {"size=65536": {"roofline": 0.919, "bound": "launch-bound"},
              "size=4194304": {"roofline": 0.806, "bound": "memory-bound"}}
    summary = {"speedup": 5.45, "roofline_shapes": shapes, "roofline_done": 0.9, "satisfied": False,
               "short": ["size=4194304"], "roofline_worst": {"shape": "size=4194304", **shapes["size=4194304"]}}
    store = Store.of(state_dir(ws))
    store.record(RunStarted("gpu-1", kernel="add_triton", path=str(ws / "kernels" / "add_triton.py"), version=1,
                            content_hash="h1", reference=str(ws / "references" / "add.py"), reference_hash="rh",
                            tier="gpu", device="NVIDIA H200", arch="sm_90a", run_dir=str(ws / ".ktui" / "runs")))
    store.record(RunFinished("gpu-1", verdict="passed", summary=summary, duration_s=3.0))
    store.close()

    async def main():
        async with connect(ws) as session:
            (run,) = (await call(session, "history", kernel="add_triton"))["runs"]
            trust = {"trusted": "pending", "trust_reasons": ["reference not audited yet: a trivial kernel might pass its test"]}
            assert run["summary"] == {**summary, **trust}  # its reference version "rh" was never audited

    anyio.run(main)


def test_a_nul_byte_an_over_long_path_and_a_16_mib_argument_are_refused_with_the_reason(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    async def main():
        async with connect(ws) as session:
            said = await error_of(session, "run", paths=["kernels/add\0_triton.py"])
            assert "NUL" in said and said != "Error executing tool run"
            assert "NUL" in await error_of(session, "latest", kernel="add\0triton")
            assert "too long" in await error_of(session, "run", paths=["kernels/" + "a" * 300 + ".py"])
            with anyio.fail_after(SAFETY_S):
                said = await error_of(session, "run", paths=["x" * (16 << 20)])
            assert "at most 4096 characters" in said and len(said) < 2000
            assert {t.name for t in (await session.list_tools()).tools} == TOOLS  # still serving

    anyio.run(main)


def test_the_server_exits_when_its_client_closes_stdin_even_after_a_16_mib_argument(tmp_path):
    import subprocess

    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "mcp", str(ws), "--cpu"], cwd=ws, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=child_env())
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run", "arguments": {"paths": ["x" * (16 << 20)]}}},
    ]
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.close()
        err = proc.stderr.read()
        proc.wait(timeout=SAFETY_S)
    finally:
        proc.kill()
    assert len(err) < 100_000, f"{len(err)} bytes on stderr"


def test_hotspots_answers_the_measured_hot_lines_of_a_profiled_version(tmp_path):
    """A version's folder as ``ktui profile`` leaves it: the static table of the Triton matmul and
    the measured lines of its Nsight Compute source page, both recorded on an H200
    (tests/fixtures/hotspots/h200, tests/profiling/test_ncu_source.py)."""
    from ktui.measure import hotspots
    from ktui.profiling.ncu import source as ncu_source

    ws = make_workspace(tmp_path / "ws", kernels=["gemm_bf16_triton"])
    folder = ws / ".ktui" / "runs" / "gemm_bf16_triton" / "1"
    folder.mkdir(parents=True)
    h200 = FIXTURES / "h200"
    name, text = "gemm_bf16_triton.py", (h200 / "gemm_bf16_triton_source.py").read_text()
    listing, ptx = (h200 / "gemm_bf16_triton.sass").read_text(), (h200 / "gemm_bf16_triton.ptx").read_text()
    hotspots.write(folder, hotspots.to_json(hotspots.attribute(listing, name, text, ptx), name))
    page = ncu_source.parse_source_page((h200 / "gemm_bf16_triton_source.csv").read_text())
    measured = ncu_source.aggregate(page, hotspots.attribute_offsets(listing, ptx), name, text)
    (folder / ncu_source.MEASURED_FILE).write_text(json.dumps(measured))

    async def main():
        async with connect(ws) as session:
            hot = await call(session, "hotspots", kernel="gemm_bf16_triton", version=1)
            (kernel,) = hot["measured"]["kernels"]
            first = kernel["hot_lines"][0]
            assert first["at"].startswith(f"{name}:") and first["text"].startswith("for kt in tl.range(")
            assert first["reading"].startswith("waiting on global memory") and first["stalls"][0][0] == "long_sb"
            assert any(x["text"] == "acc = tl.dot(a, b, acc)" and x["classes"]["mma"] for x in kernel["hot_lines"])
            assert "no hot spots" in await error_of(session, "hotspots", kernel="gemm_bf16_triton", version=7)

    anyio.run(main)
