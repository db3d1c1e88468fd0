"""CuTeDSL ahead-of-time compilation on a machine without a GPU.

Needs nvidia-cutlass-dsl (4.8.1) and torch; no GPU.  Kernels are compiled for
sm_90a and never launched.
"""

import importlib.util
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ktui.worker.dsl import cutedsl as kc  # noqa: E402  (imports no cutlass)

kc.configure_env("sm_90a")  # before cutlass is imported: CuTeDSL reads it once
pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl not installed")
torch = pytest.importorskip("torch")

ADD_KERNEL = ROOT / "kernels" / "add_cutedsl.py"
BROKEN_KERNEL = ROOT / "tests" / "fixtures" / "kernels" / "cutedsl_compile_error.py"


def load(path):
    """Import a user kernel file as a fresh module (its compile cache starts empty)."""
    spec = importlib.util.spec_from_file_location(f"user_{uuid.uuid4().hex}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_on_cpu(path, *inputs):
    module = load(path)
    with kc.CuteCapture(execute=False) as cap, pytest.raises(kc.ExecutionSkipped) as skipped:
        module.custom_kernel(*inputs)
    return module, cap.records, skipped.value


@pytest.mark.worker
def test_module_import_does_not_import_cutlass():
    code = "import sys, ktui.worker.dsl.cutedsl; assert 'cutlass' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


@pytest.mark.unit
def test_find_cute_functions_lists_only_own_functions():
    module = load(ADD_KERNEL)
    names = [name for name, _ in kc.find_cute_functions(module)]
    assert names == ["add_kernel", "add_launcher"]
    assert not kc.is_cute_function(module.custom_kernel)
    assert not kc.is_cute_function(module.cute.compile)


@pytest.mark.unit
def test_add_compiles_for_sm90a_without_gpu():
    x, y = torch.randn(1000), torch.randn(1000)
    _module, records, skipped = compile_on_cpu(ADD_KERNEL, x, y)

    assert len(records) == 1
    rec = records[0]
    assert skipped.record is rec
    assert rec["dsl"] == "cutedsl"
    assert rec["source_fn"] == "add_launcher"
    assert rec["file"] == str(ADD_KERNEL)
    assert rec["line"] > 0

    ptx = rec["artifacts"]["ptx"]
    assert ".target sm_90a" in ptx
    assert f".entry {rec['name']}(" in ptx
    assert rec["name"].startswith("kernel_cutlass_add_kernel")
    assert "ld.global.v4" in ptx  # the aligned variant vectorises

    cubin = rec["artifacts"]["cubin"]
    assert isinstance(cubin, bytes) and cubin[:4] == b"\x7fELF"
    assert "cute.kernel" in rec["artifacts"]["mlir"]
    assert rec["metadata"]["arch"] == "sm_90a"
    assert rec["metadata"]["kernels"] == [rec["name"]]
    assert not kc.is_compile_error(skipped)


@pytest.mark.unit
def test_compiled_property_gives_ktui_compiled_functions():
    module = load(ADD_KERNEL)
    with kc.CuteCapture(execute=False) as cap, pytest.raises(kc.ExecutionSkipped):
        module.custom_kernel(torch.randn(1000), torch.randn(1000))
    (fn,) = cap.compiled
    assert (fn.dsl, fn.source_fn) == ("cutedsl", "add_launcher")
    assert set(fn.artifacts) == {"mlir", "ptx", "cubin"}
    assert fn.metadata["file"] == str(ADD_KERNEL)


@pytest.mark.unit
def test_compiled_code_is_cached_not_results():
    module = load(ADD_KERNEL)
    with kc.CuteCapture(execute=False) as cap:
        for n in (1, 1000, 12345):
            with pytest.raises(kc.ExecutionSkipped):
                module.custom_kernel(torch.randn(n), torch.randn(n))
        with pytest.raises(kc.ExecutionSkipped):  # misaligned views: scalar variant
            module.custom_kernel(torch.randn(1001)[1:], torch.randn(1001)[1:])
    assert len(module._compiled) == 2
    assert [".v4" in r["artifacts"]["ptx"] for r in cap.records] == [True, False]


@pytest.mark.unit
def test_compile_error_points_into_user_file():
    module = load(BROKEN_KERNEL)
    x = torch.randn(1000)
    with kc.CuteCapture(execute=False) as cap, pytest.raises(Exception) as info:
        module.custom_kernel(x, x)
    assert not isinstance(info.value, kc.ExecutionSkipped)
    assert cap.records == []
    assert kc.is_compile_error(info.value)

    loc = kc.locate_compile_error(info.value, module.__file__)
    error_line = next(
        i for i, line in enumerate(BROKEN_KERNEL.read_text().splitlines(), 1) if "ERROR-LINE" in line
    )
    assert loc is not None
    assert loc["file"] == str(BROKEN_KERNEL)
    assert loc["line"] == error_line
    assert "scale" in loc["message"] and "\x1b[" not in loc["message"]
    assert kc.locate_compile_error(info.value, str(ADD_KERNEL)) is None


@pytest.mark.worker
def test_sass_and_resource_usage_from_cubin(tmp_path):
    knobs = pytest.importorskip("triton").knobs
    cuobjdump = knobs.nvidia.cuobjdump.path
    if not cuobjdump or not os.path.exists(cuobjdump):
        pytest.skip("triton's cuobjdump not found")
    _, records, _ = compile_on_cpu(ADD_KERNEL, torch.randn(1000), torch.randn(1000))
    cubin = tmp_path / "add.cubin"
    cubin.write_bytes(records[0]["artifacts"]["cubin"])

    sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert "code for sm_90a" in sass and "LDG.E.128" in sass
    res = subprocess.run([cuobjdump, "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert records[0]["name"] in res and "REG:" in res


@pytest.mark.unit
@pytest.mark.skipif(torch.cuda.is_available(), reason="would launch on CPU pointers")
def test_execute_true_lets_the_launch_through():
    module = load(ADD_KERNEL)
    # no driver here: the real launch fails
    with kc.CuteCapture(execute=True) as cap, pytest.raises(Exception) as info:
        module.custom_kernel(torch.randn(1000), torch.randn(1000))
    assert not isinstance(info.value, kc.ExecutionSkipped)
    assert not kc.is_compile_error(info.value)  # it compiled; the launch failed
    assert len(cap.records) == 1 and cap.records[0]["artifacts"]["cubin"]


@pytest.mark.unit
def test_capture_restores_patches_and_options():
    import cutlass.cute as cute
    from cutlass.base_dsl.compiler import DumpDir, KeepPTX
    from cutlass.base_dsl.jit_executor import JitCompiledFunction

    call = JitCompiledFunction.__call__
    shared = cute.compile._compile_options.options  # one object for every cute.compile call
    with kc.CuteCapture(execute=False):
        assert JitCompiledFunction.__call__ is not call
        with pytest.raises(RuntimeError):
            kc.CuteCapture().__enter__()
        with pytest.raises(kc.ExecutionSkipped):
            load(ADD_KERNEL).custom_kernel(torch.randn(8), torch.randn(8))
        assert shared[KeepPTX].value
    assert JitCompiledFunction.__call__ is call
    assert not shared[KeepPTX].value and shared[DumpDir].value == ""
