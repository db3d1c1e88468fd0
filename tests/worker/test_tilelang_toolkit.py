"""A TileLang kernel is built with the CUDA toolkit the ``tilelang`` extra installed, found by ktui
itself: no nvcc on PATH, no ``CUDA_HOME``, and the machine's own toolkit (``/usr/local/cuda``, where
there is one) not used. Its headers are complete (CCCL's ``nv/target`` is what a toolkit without
``nvidia-cuda-cccl`` lacked).

The CUBIN's line table names the folders of the headers it was compiled from: that says which
toolkit built it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, finished, make_workspace, parse_events, rungs

from ktui.worker.dsl.tilelang_nvcc import toolkit_home

pytestmark = pytest.mark.worker

pytest.importorskip("tilelang", reason="tilelang not installed (pip install 'ktui[tilelang]')")


def test_with_no_cuda_toolkit_on_path_the_extras_nvcc_and_headers_build_the_shipped_softmax(tmp_path):
    home = toolkit_home()
    assert home is not None, "the tilelang extra's nvidia-cuda-nvcc is not installed"
    folders = [sys.prefix + "/bin", os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    path = os.pathsep.join(f for f in dict.fromkeys(folders) if not shutil.which("nvcc", path=f))
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update(PATH=path, PYTHONPATH=str(REPO), KTUI_USER_DIR=str(tmp_path / "user"))
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_tilelang"])
    proc = subprocess.run([sys.executable, "-m", "ktui", "run", "--no-audit", "--cpu", "--no-bench", "--json",
                           "kernels/softmax_tilelang.py"], cwd=ws, env=env, capture_output=True, text=True, timeout=600)
    events = parse_events(proc.stdout)
    assert finished(events)["verdict"] == "compiled", rungs(events).get("compile")
    (cubin,) = Path(rungs(events)["dumps"]["figures"]["dir"]).glob("*.cubin")
    built = cubin.read_bytes()
    assert home.encode() in built  # its headers' folders
    assert b"/usr/local/cuda" not in built
