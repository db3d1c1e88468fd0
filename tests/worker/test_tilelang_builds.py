"""TileLang's nvcc step as ktui runs it (``ktui.worker.dsl.tilelang_nvcc``), on the CPU tier: one
nvcc run per CUDA source, whose PTX is the one the dumps show, kept in ktui's per-user build cache,
so that a save leaving a specialisation's generated code as it was never reaches nvcc.

TileLang compiles each CUDA source in a new temp folder, whose path nvcc writes into the CUBIN's
line table: two nvcc runs of the same source never give the same bytes, so an identical CUBIN is
one that was reused. Each test has a user folder of its own (its cache starts empty)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import finished, ktui, make_workspace, parse_events, rungs
from headless import Headless

pytestmark = pytest.mark.worker

pytest.importorskip("tilelang", reason="tilelang not installed (pip install 'ktui[tilelang]')")


def save(kernel: Path, text: str) -> None:
    tmp = kernel.with_name(f".{kernel.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, kernel)


def next_run(watch: Headless) -> dict[str, dict]:
    """The rungs of the watcher's next run, once it finished (which it must as ``compiled``)."""
    start = len(watch.seen)
    end = watch.until(lambda e: e.get("type") == "run_finished")
    assert end["verdict"] == "compiled", end
    return rungs(watch.seen[start:])


def built(run: dict[str, dict]) -> tuple[bytes, str]:
    """The CUBIN and PTX the run's dumps wrote."""
    folder = Path(run["dumps"]["figures"]["dir"])
    (cubin,) = folder.glob("*.cubin")
    (ptx,) = folder.glob("*.ptx")
    return cubin.read_bytes(), ptx.read_text()


def test_a_save_that_leaves_the_cuda_source_as_it_was_never_reaches_nvcc_and_one_that_changes_it_does(
        tmp_path, monkeypatch):
    monkeypatch.setenv("KTUI_USER_DIR", str(tmp_path / "user"))
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_tilelang"])
    kernel = ws / "kernels" / "softmax_tilelang.py"
    source = kernel.read_text()
    watch = Headless(ws, "--no-bench", "--cpu")
    try:
        first = next_run(watch)
        assert "reused" not in first["compile"]["figures"], first["compile"]
        cubin, ptx = built(first)
        assert ".target sm_90a" in ptx and ".entry main_kernel" in ptx  # the PTX of that CUBIN's nvcc run

        save(kernel, source.replace("def custom_kernel(", "# only the host code changed\ndef custom_kernel("))
        host_only = next_run(watch)
        assert host_only["compile"]["figures"]["reused"] == ["main_kernel"], host_only["compile"]
        assert "the same code was built before, its binary reused" in host_only["compile"]["message"]
        assert built(host_only) == (cubin, ptx)

        save(kernel, source.replace("* LOG2E)", "* LOG2E + 0.25)"))  # the body: new CUDA source
        body = next_run(watch)
        assert "reused" not in body["compile"]["figures"], body["compile"]
        assert built(body)[0] != cubin
    finally:
        assert watch.stop() in (0, 130)


def test_with_the_build_cache_off_every_compile_runs_nvcc_and_nothing_is_kept(tmp_path, monkeypatch):
    user = tmp_path / "user"
    monkeypatch.setenv("KTUI_USER_DIR", str(user))
    monkeypatch.setenv("KTUI_NO_BUILD_CACHE", "1")
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_tilelang"])
    cubins = []
    for _ in range(2):
        events = parse_events(ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", "kernels/softmax_tilelang.py",
                                   cwd=ws).stdout)
        assert finished(events)["verdict"] == "compiled"
        run = rungs(events)
        assert "reused" not in run["compile"]["figures"]
        cubins.append(built(run)[0])
    assert cubins[0] != cubins[1]  # two nvcc runs
    assert not [p for p in (user / "compilers" / "tilelang-builds").rglob("cubin")]


def test_a_compile_ahead_helper_builds_a_runs_tilelang_shapes_into_the_build_cache_and_the_worker_reuses_them(tmp_path, monkeypatch):
    import json
    import subprocess
    import sys

    from conftest import REPO

    from ktui.dispatch.session import Session
    from ktui.protocol import processes
    from ktui.protocol.job import Options
    from ktui.workspace.kernels import kernel_at

    user = tmp_path / "user"
    monkeypatch.setenv("KTUI_USER_DIR", str(user))
    ws = make_workspace(tmp_path / "ws", kernels=["softmax_tilelang"])
    job = Session(ws).prepare(kernel_at(ws / "kernels" / "softmax_tilelang.py"), Options(force_cpu=True, benchmark=False))
    env = {**os.environ, "PYTHONPATH": str(REPO), processes.PARENT_ENV: str(os.getpid())}
    helper = subprocess.Popen([sys.executable, "-m", "ktui.worker.ahead", "--arch", "sm_90a"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert json.loads(helper.stdout.readline())["type"] == "ready"
        # the traced shape (the first benchmark's) and two test shapes: three specialisations
        shapes = [{"rows": 4096, "cols": 4096}, {"rows": 3, "cols": 7}, {"rows": 97, "cols": 3001}]
        helper.stdin.write(json.dumps({"job": job.to_json(), "shapes": shapes}) + "\n")
        helper.stdin.flush()
        answer = json.loads(helper.stdout.readline())
    finally:
        helper.kill()
        helper.wait(timeout=10)
    assert (answer["type"], answer["compiled"]) == ("done", 3)
    assert len(list((user / "compilers" / "tilelang-builds").rglob("cubin"))) == 3  # its answer came once all were built
    events = parse_events(ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", "kernels/softmax_tilelang.py",
                               cwd=ws).stdout)
    assert finished(events)["verdict"] == "compiled"
    assert rungs(events)["compile"]["figures"]["reused"] == ["main_kernel"]  # the helper's build, not nvcc again
