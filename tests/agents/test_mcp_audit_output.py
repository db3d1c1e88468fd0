"""``ktui mcp`` beyond the run: ``audit``, ``output``, the dump resources, the tools' hints and the
server's version — through the MCP SDK's own client, on the CPU tier."""

from __future__ import annotations

import anyio
import pytest
from conftest import make_workspace
from test_mcp import _path_with, call, connect, error_of, stuck_to_load
from waits import SAFETY_S

from ktui import __version__

pytestmark = pytest.mark.worker

# Inputs all zeros whatever the seed: a kernel returning zeros (or its input) passes every test.
WEAK_REFERENCE = '''import torch

TESTS = [{"size": 16}, {"size": 1000}]


def generate_input(seed: int, size: int):
    return (torch.zeros(size),)


def ref_kernel(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0
'''
WEAK_KERNEL = '''import torch
import triton
import triton.language as tl

REFERENCE = "twice"


@triton.jit
def twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


def custom_kernel(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    twice_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
'''


def test_every_tool_says_whether_it_runs_code_and_the_server_gives_ktuis_version(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])

    async def main():
        async with connect(ws) as session:
            assert (session.server_info.name, session.server_info.version) == ("ktui", __version__)
            tools = {t.name: t for t in (await session.list_tools()).tools}
            writing = {name for name, t in tools.items() if not t.annotations.read_only_hint}
            running = {name for name, t in tools.items() if t.annotations.open_world_hint}
            assert running == {"run", "profile", "sanitize", "audit", "calibrate"}
            assert writing == running | {"pin"}  # pin writes .ktui/'s pinned baseline and runs nothing
            assert all(t.annotations.destructive_hint is False for t in tools.values())
            assert all(t.output_schema["required"] and t.output_schema["properties"] for t in tools.values())
            assert tools["audit"].output_schema["properties"]["references"]["items"]["properties"]["verdict"] == {
                "enum": ["strong", "weak", "error"]}

    anyio.run(main)


def test_an_audit_names_a_reference_whose_inputs_are_all_zeros_weak(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (ws / "references" / "twice.py").write_text(WEAK_REFERENCE)

    async def main():
        async with connect(ws) as session:
            progress: list[str] = []

            async def on_progress(done, total, message):
                progress.append(message)

            result = await session.call_tool("audit", {"path": "references/twice.py", "fast": True, "seed": 1},
                                             progress_callback=on_progress)
            assert not result.is_error, result.content[0].text
            answer = result.structured_content
            (twice,) = answer["references"]
            assert answer["all_strong"] is False and twice["verdict"] == "weak", twice
            assert twice["weak"] and any("zeros" in w for w in twice["weak"]), twice["weak"]
            assert any(c["status"] != "ok" for c in twice["checks"])
            assert progress and progress[-1] == "twice.py: weak"
            again = await call(session, "audit", path="twice_triton", fast=True)  # a kernel's reference, by its id
            assert again["references"][0]["verdict"] == "weak" and again["references"][0]["cached"] is True
            ran = (await call(session, "run", paths=["kernels/twice_triton.py"], no_bench=True, seed=1))["kernels"][0]
            assert ran["verdict"] == "passed" and ran["summary"]["weak_test_reasons"] == twice["reasons"], ran["summary"]
            assert ran["summary"]["trusted"] is False  # the audit's weak test: its pass proves nothing

    (ws / "kernels" / "twice_triton.py").write_text(WEAK_KERNEL)
    anyio.run(main)


def test_output_reads_what_the_kernel_printed_and_a_resource_serves_its_ptx(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["prints"])

    async def main():
        async with connect(ws) as session:
            assert "no stored versions" in await error_of(session, "output", kernel="prints")
            run = await call(session, "run", paths=["kernels/prints.py"], no_bench=True, seed=1)
            assert run["all_passed"] is True, run
            printed = await call(session, "output", kernel="prints")
            assert printed["printed"] is True and printed["version"] == 1
            assert "prints.py imported" in printed["text"] and "call 1;" in printed["text"]
            assert printed["path"].endswith(".ktui/runs/prints/1/output.txt")
            page = await call(session, "output", kernel="kernels/prints.py", max_chars=5)
            assert page["text"] == printed["text"][:5] and page["next_offset"] == 5

            templates = (await session.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["ktui://runs/{kernel}/{version}/{file}"]
            ptx = await session.read_resource("ktui://runs/prints/1/add_kernel.ptx")
            assert ".entry add_kernel" in ptx.contents[0].text
            printed_file = await session.read_resource("ktui://runs/prints/1/output.txt")
            assert printed_file.contents[0].text == printed["text"]

    anyio.run(main)


def test_profile_and_sanitize_without_a_gpu_answer_at_once_with_the_reason(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    loaded = stuck_to_load(ws, tmp_path / "bin")  # at once: before loading a kernel that takes ten minutes to

    async def main():
        async with connect(ws, env=_path_with(tmp_path / "bin")) as session:
            for tool in ("profile", "sanitize"):
                with anyio.fail_after(SAFETY_S):
                    message = await error_of(session, tool, kernel="stuck_triton")
                assert "no GPU" in message or "not installed" in message, message
                assert not loaded.exists(), f"{tool} loaded the kernel before saying why it cannot run"

    anyio.run(main)


def test_context_search_finds_what_init_put_in_context_and_says_what_to_add_when_nothing_matches(tmp_path):
    from conftest import ktui

    assert ktui("init", "ws", cwd=tmp_path).returncode == 0
    ws = tmp_path / "ws"
    bare = make_workspace(tmp_path / "bare", kernels=["add_triton"])

    async def main():
        async with connect(ws) as session:
            found = await call(session, "context_search", query="make_layout", limit=5)
            assert found["hits"] and found["sources"] == ["cutedsl", "tilelang", "triton"] and "hint" not in found
            assert all(h["file"].startswith("context/cutedsl/") for h in found["hits"][:1]), found["hits"][0]
            assert (await call(session, "context_search", query="tl.program_id"))["hits"]
            nothing = await call(session, "context_search", query="zqxjv")
            assert nothing["hits"] == [] and "ktui context add cutlass" in nothing["hint"], nothing
        async with connect(bare) as session:
            message = await error_of(session, "context_search", query="make_layout")
            assert "holds no source yet" in message and "ktui context add ptx" in message, message

    anyio.run(main)
