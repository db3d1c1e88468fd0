"""TileLang on the CPU tier: its kernels are found, compiled for sm_90a with every dump, a compile
error is placed at the user's line, and a machine without TileLang is told what to install.

Needs tilelang (the `tilelang` extra, part of `test`) and nvcc 13.x (the extra's
nvidia-cuda-nvcc, or one on PATH); no GPU: kernels are compiled and never launched.
"""

import json
from pathlib import Path

import pytest
from conftest import by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.agents.dumps import read_dump

pytestmark = pytest.mark.worker

pytest.importorskip("tilelang", reason="tilelang not installed (pip install 'ktui[tilelang]')")


def run_json(root: Path, kernel: str, *flags: str, env: dict | None = None) -> list[dict]:
    proc = ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", *flags, f"kernels/{kernel}.py", cwd=root, env=env)
    return parse_events(proc.stdout)


def test_a_tilelang_kernel_compiles_for_sm90a_on_the_cpu_tier_with_tir_cuda_ptx_cubin_and_sass(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_tilelang"])
    events = run_json(root, "add_tilelang")
    r = rungs(events)
    assert r["pre-checks"]["figures"]["tilelang_kernels"] == ["add_tiles", "add_tail"]
    assert r["pre-checks"]["figures"]["compile_only"] == "TileLang"  # the header's "CPU tier: TileLang compiled …"
    assert r["compile"]["status"] == "ok" and r["compile"]["figures"]["arch"] == "sm_90a", r["compile"]
    run_dir = Path(r["dumps"]["figures"]["dir"])
    for suffix in ("tir", "cu", "ptx", "cubin", "sass"):
        assert (run_dir / f"add_tiles.{suffix}").stat().st_size > 0, suffix
    assert ".target sm_90a" in (run_dir / "add_tiles.ptx").read_text()
    assert "LDG.E.128" in (run_dir / "add_tiles.sass").read_text()  # the whole tiles move 128 bits at a time
    cuda = read_dump(run_dir, "cuda", "add_tiles", 0, 100_000)["text"]  # what an agent reads through MCP
    assert 'extern "C" __global__' in cuda and "float4" in cuda  # float32, four at a time
    assert "@T.prim_func" in read_dump(run_dir, "tir", "add_tiles", 0, 100_000)["text"]
    resources = json.loads((run_dir / "resources.json").read_text())
    (usage,) = resources.values()
    assert usage["dsl"] == "tilelang" and usage["registers"] > 0 and usage["spill_instructions"] == 0
    checks = [v for name, v in r.items() if name.startswith("correctness[")]
    assert checks and all(v["status"] == "skipped" and "TileLang kernels need a GPU" in v["message"] for v in checks)
    end = finished(events)
    assert end["verdict"] == "compiled"
    assert end["summary"]["compile_only"] == "CPU tier: TileLang compiled for sm_90a only, not run"


def test_a_tilelang_compile_error_is_placed_at_the_users_line(tmp_path):
    root = make_workspace(tmp_path / "ws", fixtures=["tilelang_compile_error"])
    source = (root / "kernels" / "tilelang_compile_error.py").read_text().splitlines()
    marked = next(n for n, line in enumerate(source, 1) if "ERROR-LINE" in line)
    compile_rung = rungs(run_json(root, "tilelang_compile_error"))["compile"]
    assert compile_rung["status"] == "failed"
    error = compile_rung["error"]
    assert error["location"]["line"] == marked, error
    assert Path(error["location"]["file"]).name == "tilelang_compile_error.py"
    assert "1-dimensional" in error["message"] and "def main" not in error["message"]  # not TileLang's rewritten source


def test_a_tilelang_kernel_without_tilelang_installed_says_what_to_install(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_tilelang"])
    absent = tmp_path / "no_tilelang"  # shadows the installed package: importing it fails as if missing
    (absent / "tilelang").mkdir(parents=True)
    (absent / "tilelang" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'tilelang'\", name='tilelang')\n")
    pre = rungs(run_json(root, "add_tilelang", env={"PYTHONPATH": f"{absent}:{Path(__file__).parents[2]}"}))["pre-checks"]
    assert pre["status"] == "failed"
    assert pre["message"] == ("add_tilelang.py is a TileLang kernel, and TileLang is not installed here: "
                              "pip install 'ktui[tilelang]'")
    assert "Traceback" not in pre["message"]


def test_a_module_with_no_kernel_of_any_of_the_three_dsls_is_refused(tmp_path):
    root = make_workspace(tmp_path / "ws", fixtures=["no_kernel"])
    pre = rungs(run_json(root, "no_kernel"))["pre-checks"]
    assert pre["status"] == "failed"
    assert ("no_kernel.py contains no Triton (@triton.jit), CuTeDSL (@cute.jit/@cute.kernel) or TileLang "
            "(@tilelang.jit) kernel") in pre["message"]


def test_the_shipped_tilelang_kernels_compile_without_spills_and_the_gemm_uses_wgmma_and_tma(tmp_path):
    shipped = ["softmax_tilelang", "rmsnorm_tilelang", "gemm_bf16_tilelang"]
    root = make_workspace(tmp_path / "ws", kernels=shipped)
    proc = ktui("run", "--no-audit", "--cpu", "--no-bench", "--json", "kernels/", cwd=root)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    kernels = by_kernel(parse_events(proc.stdout))
    assert sorted(kernels) == sorted(shipped)
    for name in shipped:
        r = rungs(kernels[name])
        (usage,) = r["dumps"]["figures"]["functions"].values()
        assert usage["spill_instructions"] == 0 and usage["local"] == 0, (name, usage)
        assert finished(kernels[name])["verdict"] == "compiled"
    gemm_sass = (Path(rungs(kernels["gemm_bf16_tilelang"])["dumps"]["figures"]["dir"]) / "gemm.sass").read_text()
    assert "HGMMA" in gemm_sass and "UTMALDG" in gemm_sass
