"""Which GPUs ktui runs on: ``--gpus``, the parent's CUDA_VISIBLE_DEVICES, else nvidia-smi's list.

nvidia-smi here is a small script on PATH that prints what nvidia-smi prints on a two-GPU host
(this machine has none), so the real lookup, subprocess and parsing run.
"""

from __future__ import annotations

import os
import stat

import pytest
from conftest import ktui, make_workspace

from ktui.dispatch.gpus import Device, DeviceError, parse_gpus, visible_devices

LISTING = "0, GPU-1111-aaaa, NVIDIA H200\n1, GPU-2222-bbbb, NVIDIA H200\n"


@pytest.fixture
def two_gpu_host(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncat <<'EOF'\n" + LISTING + "EOF\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return bin_dir


@pytest.mark.worker
def test_every_gpu_nvidia_smi_lists_is_used_with_its_uuid_and_model(two_gpu_host):
    assert visible_devices() == [Device("0", "GPU-1111-aaaa", "NVIDIA H200"), Device("1", "GPU-2222-bbbb", "NVIDIA H200")]


@pytest.mark.worker
def test_the_parents_cuda_visible_devices_decides_which_and_in_what_order(two_gpu_host):
    assert [d.index for d in visible_devices(env={"CUDA_VISIBLE_DEVICES": "1"})] == ["1"]
    assert visible_devices(env={"CUDA_VISIBLE_DEVICES": "1,0"})[0] == Device("1", "GPU-2222-bbbb", "NVIDIA H200")
    assert visible_devices(env={"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_devices(env={"CUDA_VISIBLE_DEVICES": "-1"}) == []


@pytest.mark.worker
def test_gpus_picks_by_index_or_uuid_and_a_gpu_the_host_lacks_is_an_error(two_gpu_host):
    assert visible_devices("GPU-2222-bbbb") == [Device("GPU-2222-bbbb", "GPU-2222-bbbb", "NVIDIA H200")]
    assert [d.uuid for d in visible_devices("1,0")] == ["GPU-2222-bbbb", "GPU-1111-aaaa"]
    with pytest.raises(DeviceError, match="no GPU 5 on this host"):
        visible_devices("0,5")


@pytest.mark.unit
def test_a_host_without_nvidia_smi_has_no_gpu_listed(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_devices() == []
    assert visible_devices("0,1") == [Device("0"), Device("1")]  # named: taken as given


@pytest.mark.unit
@pytest.mark.parametrize("text, says", [
    ("", "comma-separated list"), ("0,,1", "comma-separated list"), ("zero", "neither a GPU index"),
    ("0,1,0", "names a GPU twice"),
])
def test_a_bad_gpus_list_says_what_is_wrong(text, says):
    with pytest.raises(DeviceError, match=says):
        parse_gpus(text)


@pytest.mark.worker
def test_ktui_run_with_a_bad_gpus_list_stops_before_any_worker_with_the_reason(tmp_path):
    ws = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    proc = ktui("run", "--no-audit", "--gpus", "0,0", "kernels/add_triton.py", cwd=ws, timeout=60)
    assert proc.returncode == 2 and "--gpus names a GPU twice" in proc.stderr
    proc = ktui("run", "--no-audit", "--gpus", "0", "--remote", "gpu1", "kernels/add_triton.py", cwd=ws, timeout=60)
    assert proc.returncode == 2 and "cannot be combined with --remote" in proc.stderr
