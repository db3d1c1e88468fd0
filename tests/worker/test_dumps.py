"""The dumps rung writes every CUBIN's listing and resources, running the tools of several CUBINs at
once and leaving none behind (an H200 CUBIN, tests/fixtures/hotspots/h200)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from ktui.measure import sass
from ktui.worker.outcome import CompiledFunction
from ktui.worker.phases import Phases
from ktui.worker.rungs import dumps

pytestmark = pytest.mark.worker

H200 = Path(__file__).parent.parent / "fixtures" / "hotspots" / "h200"


def compiled(n: int) -> list[CompiledFunction]:
    """``n`` builds of the shipped GEMM's CUBIN, as the compile rung reports two specialisations."""
    cubin = (H200 / "gemm_bf16_triton.cubin").read_bytes()
    ptx = (H200 / "gemm_bf16_triton.ptx").read_text()
    return [CompiledFunction("triton", "matmul_tma", "matmul_tma", {"ptx": ptx, "cubin": cubin}) for _ in range(n)]


def logging_tool(tmp_path: Path, name: str) -> Path:
    """A wrapper of the real ``name`` that notes its start and end in ``tools.log``."""
    real = sass.find_tool(name)
    wrapper = tmp_path / name
    wrapper.write_text(f'#!/bin/sh\necho "start $$" >> "{tmp_path}/tools.log"\nsleep 0.3\n"{real}" "$@"\n'
                       f'status=$?\necho "end $$" >> "{tmp_path}/tools.log"\nexit $status\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def most_at_once(log: Path) -> int:
    running = most = 0
    for line in log.read_text().splitlines():
        running += 1 if line.startswith("start") else -1
        most = max(most, running)
    return most


def test_each_cubin_gets_its_listing_and_resources_from_tools_run_side_by_side(tmp_path, monkeypatch):
    monkeypatch.setenv("KTUI_NVDISASM", str(logging_tool(tmp_path, "nvdisasm")))
    run_dir, written, phases = tmp_path / "run", [], Phases()
    outcome = dumps.write(compiled(dumps.TOOLS_AT_ONCE + 2), run_dir, written, phases=phases)

    assert most_at_once(tmp_path / "tools.log") == dumps.TOOLS_AT_ONCE
    expected = sass.without_line_info(sass.disassemble(H200 / "gemm_bf16_triton.cubin", line_info=True))
    stems = ["matmul_tma", *(f"matmul_tma.{i}" for i in range(1, dumps.TOOLS_AT_ONCE + 2))]
    for stem in stems:
        assert (run_dir / f"{stem}.sass").read_text() == expected
    resources = json.loads((run_dir / "resources.json").read_text())
    assert resources["matmul_tma"]["registers"] > 0 and resources["matmul_tma"]["instructions"] > 0
    assert outcome.figures["functions"]["matmul_tma"]["registers"] == resources["matmul_tma"]["registers"]
    assert [kind for kind, _, _ in written].count("sass") == len(stems)
    assert set(phases.take()) == {"files", "tools", "analysis"}


def test_a_failing_tool_fails_the_rung_with_its_message_and_leaves_no_tool_running(tmp_path, monkeypatch):
    failing = tmp_path / "nvdisasm"
    failing.write_text('#!/bin/sh\necho "$$" >> "' + str(tmp_path) + '/pids"\n'
                       'case "$*" in *matmul_tma.cubin*) echo "cannot read it" >&2; exit 3;; esac\nexec sleep 60\n')
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KTUI_NVDISASM", str(failing))

    with pytest.raises(RuntimeError, match=r"nvdisasm failed \(3\): cannot read it"):
        dumps.write(compiled(3), tmp_path / "run", [])

    for pid in (int(line) for line in (tmp_path / "pids").read_text().split()):
        assert not _alive(pid), f"tool {pid} outlived the failed dumps"


def test_a_tool_that_runs_past_its_limit_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(sass, "TOOL_TIMEOUT_S", 0.5)
    started = sass.Started(["sleep", "30"])
    with pytest.raises(subprocess.TimeoutExpired):
        started.output()
    assert started._proc.poll() is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state not in ("Z", "X")
