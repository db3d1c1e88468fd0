"""Answers an agent can act on at once, through the MCP SDK's own client on the CPU tier: trust in
one field, the workspace at a glance (``kernels``, its resource, ``pin``, ``calibrate``, the
``satisfy`` prompt, ``run``'s ``reference``), and the rough edges: one-line argument errors,
resource errors of the SDK's type, no progress after a cancel, the tools' words, compact answers."""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from conftest import FIXTURES, REPO, make_workspace
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from test_mcp import call, connect, error_of
from waits import until

from ktui.worker.timing.calibrate import MEASURE_ENV
from ktui.workspace.scaffold import loop_text

pytestmark = pytest.mark.worker

CALIBRATION_FAKE = FIXTURES / "calibration" / "fake_gpu.py"


@asynccontextmanager
async def logged(workspace: Path, log: Path):
    """A session whose server's stderr (its log) is kept in ``log``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "ktui", "mcp", str(workspace), "--cpu"],
                                   env={"PYTHONPATH": str(REPO)}, cwd=str(workspace))
    with log.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def test_a_wrong_kernel_passing_a_test_of_zeros_is_not_trusted_in_every_answer(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["triple_zeros"])

    async def main():
        async with connect(ws) as session:
            result = await session.call_tool("run", {"paths": ["kernels/triple_zeros.py"], "no_bench": True,
                                                     "strict": True})  # its audit waited for
            ran = result.structured_content
            (triple,) = ran["kernels"]
            assert triple["verdict"] == "passed" and ran["all_passed"] is True  # ×3 and ×2 of zeros agree
            assert triple["summary"]["trusted"] is False and ran["all_trusted"] is False
            reasons = triple["summary"]["trust_reasons"]
            assert reasons[0].startswith("no signal on every shape") and reasons[1].startswith("weak test: "), reasons
            assert "NOT TRUSTED: no signal on every shape" in result.content[0].text  # the text says it too
            assert (await call(session, "latest", kernel="triple_zeros"))["summary"]["trusted"] is False
            (stored,) = (await call(session, "history", kernel="triple_zeros"))["runs"]
            assert stored["summary"]["trusted"] is False
            (listed,) = (await call(session, "kernels"))["kernels"]
            assert listed["trusted"] is False

    anyio.run(main)


def test_a_pass_is_pending_until_the_run_tool_audits_its_reference(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    async def main():
        async with connect(ws) as session:
            quiet = await call(session, "run", paths=["kernels/add_triton.py"], no_bench=True, audit=False)
            assert quiet["kernels"][0]["summary"]["trusted"] == "pending" and quiet["all_trusted"] is False
            assert (await call(session, "latest", kernel="add_triton"))["summary"]["trusted"] == "pending"
            handed = await call(session, "run", paths=["kernels/add_triton.py"], no_bench=True)
            assert handed["audits"][0]["verdict"] == "pending"  # answered at its verdict: audited in the background
            assert handed["kernels"][0]["summary"]["trusted"] == "pending" and handed["all_trusted"] is False
            audits = ws / ".ktui" / "audits"
            assert await anyio.to_thread.run_sync(until, lambda: audits.is_dir() and list(audits.iterdir()))
            assert (await call(session, "latest", kernel="add_triton"))["summary"]["trusted"] is True
            audited = await call(session, "run", paths=["kernels/add_triton.py"], no_bench=True)
            assert "audits" not in audited and audited["all_trusted"] is True

    anyio.run(main)


def test_the_workspace_at_a_glance_a_pin_a_reference_and_the_satisfy_prompt(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton", "add_cutedsl"])
    pair = ws / "kb"
    pair.mkdir()
    for name in ("19_ReLU.py", "relu_copy_modelnew.py"):
        shutil.copy(FIXTURES / "kernelbench" / name, pair / name)

    async def main():
        async with connect(ws) as session:
            before = {k["kernel"]: k for k in (await call(session, "kernels"))["kernels"]}
            assert before["add_cutedsl"] == {"path": "kernels/add_cutedsl.py", "kernel": "add_cutedsl", "dsl": "cutedsl",
                                             "version": None, "verdict": None, "stale": True, "best": None,
                                             "satisfied": None, "trusted": None}
            await call(session, "run", paths=["kernels/add_triton.py"], no_bench=True, audit=False)
            listed = {k["kernel"]: k for k in (await call(session, "kernels"))["kernels"]}
            assert (listed["add_triton"]["version"], listed["add_triton"]["verdict"]) == (1, "passed")
            assert listed["add_triton"]["dsl"] == "triton" and listed["add_triton"]["stale"] is False
            assert listed["add_triton"]["trusted"] == "pending" and listed["add_triton"]["satisfied"] is None  # CPU tier
            resource = await session.read_resource("ktui://kernels")
            assert json.loads(resource.contents[0].text)["kernels"] == list(listed.values())

            assert (await call(session, "pin", kernel="add_triton"))["pinned"] == 1
            assert "no version 7" in await error_of(session, "pin", kernel="add_triton", version=7)
            assert (await call(session, "pin", kernel="add_triton", clear=True))["pinned"] is None

            kb = await call(session, "run", paths=["kb/relu_copy_modelnew.py"], reference="kb/19_ReLU.py",
                            no_bench=True, audit=False)
            assert kb["kernels"][0]["verdict"] == "passed", kb

            prompts = (await session.list_prompts()).prompts
            assert [p.name for p in prompts] == ["satisfy"]
            prompt = await session.get_prompt("satisfy", {"kernel": "kernels/add_triton.py"})
            text = prompt.messages[0].content.text
            assert "Make `kernels/add_triton.py` satisfied" in text and "`trusted: true`" in text
            assert loop_text() in text  # the skill's own loop, word for word

    anyio.run(main)


def test_calibrate_measures_through_ktui_calibrate_with_progress(tmp_path):
    ws = make_workspace(tmp_path / "ws")
    env = {"KTUI_USER_DIR": str(tmp_path / "user"), MEASURE_ENV: str(CALIBRATION_FAKE)}

    async def main():
        async with connect(ws, env=env) as session:
            notes = []

            async def on_progress(done, total, message):
                notes.append(message)

            result = await session.call_tool("calibrate", {"time_s": 0.5}, progress_callback=on_progress)
            assert not result.is_error, result.content[0].text
            answer = result.structured_content
            assert answer["device"] == "NVIDIA H200" and answer["launch_floor"]["floor_us"] == 3.5
            assert answer["path"].endswith("NVIDIA_H200_driver_570.124.06.json") and "details" not in answer
            assert any("measuring NVIDIA H200" in note for note in notes), notes

    anyio.run(main)


def test_argument_and_resource_errors_are_one_clear_line_answered_at_once(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    log = tmp_path / "server.log"

    async def main():
        async with logged(ws, log) as session:
            extra = await error_of(session, "run", paths=["kernels/add_triton.py"], remote=True)
            assert extra.startswith("run: remote is not an argument of run (it takes paths, strict"), extra
            typed = await error_of(session, "run", paths="kernels/add_triton.py", seed="x")
            assert typed.startswith("run: paths: input should be a valid list (got 'kernels/add_triton.py'); seed: ")
            for message in (extra, typed):
                assert "\n" not in message and "pydantic" not in message and "http" not in message, message
            with pytest.raises(MCPError) as refused:
                await session.read_resource("ktui://runs/nothing/1/x.ptx")
            assert refused.value.error.code == -32602  # the SDK's resource-not-found, not a crash
            assert "nothing: no such kernel" in refused.value.error.message, refused.value.error.message
            with pytest.raises(MCPError) as missing:
                await session.read_resource("ktui://runs/add_triton/1/add_kernel.ptx")
            assert "no run of that version" in missing.value.error.message

    anyio.run(main)
    assert "Traceback" not in log.read_text()


def test_a_cancelled_run_leaves_no_progress_behind_and_latest_agrees_with_history(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["hang"])

    async def main():
        async with connect(ws) as session:
            started = anyio.Event()

            async def on_start(done, total, message):
                if "started" in message:
                    started.set()

            async with anyio.create_task_group() as tg:
                async def hang():
                    await session.call_tool("run", {"paths": ["kernels/hang.py"]}, progress_callback=on_start)

                tg.start_soon(hang)
                with anyio.fail_after(120):
                    await started.wait()
                tg.cancel_scope.cancel()
            notes: list[tuple[float, float | None, str]] = []

            async def on_progress(done, total, message):
                notes.append((done, total, message))

            result = await session.call_tool("run", {"paths": ["kernels/add_triton.py"], "no_bench": True, "audit": False},
                                             progress_callback=on_progress)
            assert not result.is_error, result.content[0].text
            assert all(n[2] == "waiting for the run in flight to finish" for n in notes if n[0] == 0)  # the cancel's end
            notes = [n for n in notes if n[0] > 0]
            assert notes[0][2].startswith("add_triton v1: started"), notes[:3]  # nothing of the cancelled run
            assert not [n for n in notes if "hang" in n[2] or "cancelled" in n[2]], notes
            assert all(total is not None for _, total, _ in notes[2:]), notes  # counted once its pre-checks are
            assert notes[-1][0] == notes[-1][1] and notes[-1][2] == "finished: passed", notes[-1]
            assert [done for done, _, _ in notes] == sorted({done for done, _, _ in notes})  # increasing

            history = await call(session, "history", kernel="hang")
            assert [(r["version"], r["verdict"]) for r in history["runs"]] == [(1, "cancelled")]
            said = await error_of(session, "latest", kernel="hang")
            assert said == ("hang: no finished verdict yet: its newest run, v1, ended cancelled (history lists it); "
                            "call run with paths=['kernels/hang.py']"), said

    anyio.run(main)


def test_answers_are_compact_in_the_tools_words_with_paths_in_the_workspace(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"], fixtures=["raises"])

    async def main():
        async with connect(ws) as session:
            result = await session.call_tool("run", {"paths": ["kernels/raises.py", "kernels/add_triton.py"],
                                                     "no_bench": True, "audit": False})
            raises, add = result.structured_content["kernels"]
            assert "first_failure" not in raises["summary"] and raises["first_failure"]["where"] == "kernels/raises.py:19"
            assert (add["path"], add["run_dir"]) == ("kernels/add_triton.py", ".ktui/runs/add_triton/1")
            text = result.content[0].text
            assert text.splitlines() == [
                "raises v1 failed · run: KeyError: 'y' at kernels/raises.py:19",
                "add_triton v1 passed · 5/5 correct · trust pending: reference not audited yet: a trivial kernel might "
                "pass its test"], text
            assert str(ws) not in json.dumps(result.structured_content)

            page = await session.call_tool("dump", {"kernel": "add_triton", "kind": "sass"})
            sass = page.structured_content
            assert len(sass["text"]) <= 8000 and sass["path"] == ".ktui/runs/add_triton/1/add_kernel.sass"
            assert page.content[0].text.endswith(sass["text"])  # the page under a one-line header, not the JSON

            best = await error_of(session, "diff", kernel="add_triton", base="best")
            pinned = await error_of(session, "diff", kernel="add_triton", base="pinned")
            assert best.endswith("use base='previous' or a version number"), best
            assert pinned.endswith("pin one with the pin tool"), pinned
            kernel = ws / "kernels" / "add_triton.py"
            kernel.write_text(kernel.read_text() + "\n# v2\n")
            await call(session, "run", paths=["kernels/add_triton.py"], no_bench=True, audit=False)
            kernel.write_text(kernel.read_text() + "\n# not run yet\n")
            diff = await call(session, "diff", kernel="add_triton")
            assert (diff["base_version"], diff["new_version"]) == (1, 2)
            assert diff["note"] == ("add_triton.py changed since v2 was run; showing v2 (call run with "
                                    "paths=['kernels/add_triton.py'] to see the new code)"), diff["note"]
            for said in (best, pinned, diff["note"]):
                assert "ktui " not in said and "--base" not in said, said

    anyio.run(main)
