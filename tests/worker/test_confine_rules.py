"""What a confined process may read is named by construction: folders the environment names are
refused when they would open the home folder, a workspace's state or the system's temp folder; a
workspace is read without its state; the loader's folders come from its own configuration; the
network filter lets a process make Unix sockets only."""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

import pytest

from ktui.protocol.statedir import readable_entries
from ktui.worker.confine import landlock
from ktui.worker.confine.network import ARCHITECTURES, program
from ktui.worker.confine.rules import Refused, compiler_paths, loader_paths, rules, workspace_rules
from ktui.worker.timing import gpu_lock

pytestmark = pytest.mark.unit


def _refused(tmp_path: Path, workspace: Path) -> Refused:
    return Refused(states=[workspace / ".ktui"], wholes=[workspace], home=tmp_path / "home",
                   system_tmp=tmp_path / "tmp")


@pytest.fixture
def places(tmp_path):
    home, workspace = tmp_path / "home", tmp_path / "ws"
    for folder in (home / ".ssh", home / "lib", tmp_path / "tmp" / "x", workspace / "kernels", workspace / ".ktui" / "owner",
                   tmp_path / "other" / ".ktui", tmp_path / "venv" / "lib"):
        folder.mkdir(parents=True)
    return home, workspace


def test_a_folder_the_environment_names_is_refused_where_it_would_open_the_home_a_state_or_temp(tmp_path, places):
    home, workspace = places
    refused = _refused(tmp_path, workspace)
    kept = refused.keep([home, tmp_path, Path("/"), tmp_path / "tmp", workspace, workspace / ".ktui" / "owner",
                         tmp_path / "other", home / "lib", tmp_path / "venv" / "lib", workspace / "kernels",
                         Path("relative")])
    # a PYTHONPATH=~, /, a workspace's root or state, another workspace: out; a library folder in: in
    assert kept == [(home / "lib").resolve(), (tmp_path / "venv" / "lib").resolve(), (workspace / "kernels").resolve()]


def test_a_link_is_judged_where_it_leads(tmp_path, places):
    home, workspace = places
    (tmp_path / "lib-link").symlink_to(home)
    assert _refused(tmp_path, workspace).keep([tmp_path / "lib-link"]) == []


def test_a_workspace_is_read_without_its_state_its_hidden_entries_or_a_workspace_inside_it(tmp_path, places):
    _, workspace = places
    (workspace / "references").mkdir()
    (workspace / "helper.py").write_text("")
    (workspace / ".git").mkdir()
    (workspace / "nested" / ".ktui").mkdir(parents=True)
    (workspace / "state").mkdir()  # a --state-dir inside the workspace
    (workspace / "to-home").symlink_to(tmp_path / "home")
    entries = readable_entries(workspace, [workspace / "state"])
    assert [e.name for e in entries] == ["helper.py", "kernels", "references", "to-home"]
    refused = _refused(tmp_path, workspace)
    made = workspace_rules([workspace], [workspace / ".ktui", workspace / "state"], refused)
    assert made[0] == landlock.Rule(workspace, landlock.READ_DIR)  # listed, for Python to find modules
    assert [r.path.name for r in made[1:4]] == ["helper.py", "kernels", "references"]  # not the link to home
    assert all(r.rights == landlock.READ for r in made[1:4])
    assert made[4:] == [landlock.Rule(workspace / ".ktui" / "calibration.json", landlock.READ_FILE)]  # of its state


def test_a_file_named_to_read_is_read_unless_it_lies_in_a_state(tmp_path, places):
    _, workspace = places
    (workspace / ".ktui" / "owner" / "token").write_text("secret")
    (tmp_path / "ref.py").write_text("")
    made = workspace_rules([tmp_path / "ref.py", workspace / ".ktui" / "owner" / "token"], [workspace / ".ktui"],
                           _refused(tmp_path, workspace))
    assert made == [landlock.Rule(tmp_path / "ref.py", landlock.READ_FILE)]


def test_the_loaders_folders_come_from_its_configuration_and_its_includes(tmp_path, monkeypatch):
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "cuda.conf").write_text("/usr/local/cuda-13.0/lib  # the toolkit\n")
    (tmp_path / "ld.so.conf").write_text("include conf.d/*.conf\n# a comment\n/opt/lib\n")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
    assert loader_paths(tmp_path / "ld.so.conf") == [Path("/usr/local/nvidia/lib64"), Path("/usr/local/cuda-13.0/lib"),
                                                     Path("/opt/lib")]


def test_every_rule_of_a_confined_process_grants_only_rights_the_abi_handles_and_writes_only_where_it_owns(tmp_path,
                                                                                                          places):
    _, workspace = places
    runs, tmp, cache = workspace / ".ktui" / "runs", tmp_path / "private", tmp_path / "caches" / "triton"
    made = rules(7, [runs], [workspace], tmp, [cache], tmp_path / "tmp", network=False, gpu=False)
    writes = {r.path for r in made if r.rights & landlock.WRITE_FILE}
    assert writes == {runs, tmp, cache, Path("/dev/null"), Path("/dev/zero"), gpu_lock.lock_dir()}
    assert runs.is_dir() and cache.is_dir()  # made first
    assert not any(r.path == Path("/etc") or r.path == Path("/etc/shadow") for r in made)
    assert not any(r.path == Path("/etc/resolv.conf") for r in made)  # the resolver only with the network
    assert all(r.rights & ~landlock.handled_rights(7) == 0 for r in made)
    with_network = rules(7, [runs], [workspace], tmp, [cache], tmp_path / "tmp", network=True, gpu=False)
    assert any(r.path == Path("/etc/resolv.conf") for r in with_network)


def test_a_folder_given_to_read_whole_is_made_and_read_never_written(tmp_path, places):
    """The worker's rule for the user's calibrations: what the measuring process keeps there later
    it reads, and nothing there is its to write (``ktui.worker.main.sandbox``)."""
    _, workspace = places
    runs, calibrations = workspace / ".ktui" / "runs", tmp_path / "user" / "calibration"
    made = rules(7, [runs], [workspace], tmp_path / "private", [], tmp_path / "tmp", network=False, gpu=False,
                 read_only=[calibrations])
    assert calibrations.is_dir()  # made before the rules: a file kept in it later is read too
    assert landlock.Rule(calibrations, landlock.READ) in made
    assert not any(r.rights & landlock.WRITE_FILE and (r.path == calibrations or r.path in calibrations.parents)
                   for r in made)


@pytest.mark.parametrize("machine", sorted(ARCHITECTURES))
def test_the_network_filter_lets_only_unix_sockets_be_made(machine):
    arch, socket_nr = ARCHITECTURES[machine]

    def run(nr: int, family: int = 0, on: int = arch) -> int:
        """The filter's verdict on one system call, played as the kernel plays BPF."""
        data = {0: nr, 4: on, 16: family}
        acc, pc = 0, 0
        instructions = program(machine)
        while True:
            code, jt, jf, k = instructions[pc]
            if code == 0x20:
                acc, pc = data[k], pc + 1
            elif code == 0x15:
                pc += 1 + (jt if acc == k else jf)
            elif code == 0x35:
                pc += 1 + (jt if acc >= k else jf)
            else:
                return k

    allow, errno_of, kill = 0x7FFF0000, lambda e: 0x00050000 | e, 0x80000000
    assert run(socket_nr, socket.AF_UNIX) == allow
    assert run(socket_nr, socket.AF_INET) == errno_of(errno.EAFNOSUPPORT)
    assert run(socket_nr, socket.AF_INET6) == errno_of(errno.EAFNOSUPPORT)
    assert run(socket_nr, socket.AF_PACKET) == errno_of(errno.EAFNOSUPPORT)
    assert run(425) == errno_of(errno.ENOSYS)  # io_uring_setup: sockets no filter sees
    assert run(0x40000000 | socket_nr) == errno_of(errno.ENOSYS)  # x32
    assert run(socket_nr, socket.AF_INET, on=0x40000003) == kill  # a 32-bit program
    assert run(socket_nr + 1) == allow  # any other call
    assert program("riscv64") is None


def test_a_file_named_inside_a_workspace_hides_none_of_its_folders(tmp_path, places):
    _, workspace = places
    (workspace / "kernels" / "k.py").write_text("")
    made = rules(7, [], [workspace, workspace / "kernels" / "k.py"], tmp_path / "private", [], tmp_path / "tmp",
                 network=False, gpu=False)
    assert landlock.Rule(workspace / "kernels", landlock.READ) in made


def test_a_host_compiler_outside_the_system_folders_is_read_from_its_install_folder(tmp_path, monkeypatch):
    """nvcc runs the gcc it finds on PATH; a gcc in /opt/gcc/bin reads headers from /opt/gcc/lib
    (TileLang's builds failed on the H200 with 'limits.h: Permission denied' without it)."""
    prefix = tmp_path / "opt" / "gcc"
    (prefix / "bin").mkdir(parents=True)
    gcc = prefix / "bin" / "gcc"
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "cc").symlink_to(gcc)
    monkeypatch.setenv("PATH", f"{tmp_path / 'links'}{os.pathsep}{prefix / 'bin'}")
    assert compiler_paths() == [prefix, prefix]


def test_the_gpu_nodes_the_driver_makes_on_first_use_are_made_before_the_sandbox(monkeypatch):
    """Inside the sandbox cuInit cannot make /dev/nvidia-uvm (error 304 where the machine's first CUDA
    program is confined): nvidia-modprobe makes it first, as libcuda would."""
    import sys

    rules_module = sys.modules["ktui.worker.confine.rules"]

    calls = []
    monkeypatch.setattr(rules_module.shutil, "which", lambda name: f"/opt/bin/{name}")
    monkeypatch.setattr(rules_module.os.path, "exists", lambda p: p == "/dev/nvidia-uvm" and bool(calls))
    assert rules_module.gpu_nodes_made(run=lambda argv, **kw: calls.append(argv))
    assert calls == [["/opt/bin/nvidia-modprobe", "-u", "-c=0"]]


def test_a_gpu_cuda_could_not_start_in_the_sandbox_is_named_with_the_way_out():
    from dataclasses import dataclass

    from ktui.worker.tier_named import sandbox_named

    @dataclass(frozen=True)
    class Tier:  # the fields of ktui.worker.tier.Tier, without torch
        name: str
        device: str
        arch: str
        torch_device: str

        @property
        def is_gpu(self) -> bool:
            return self.name == "gpu"

    failed = Tier("cpu", "CPU (Triton interpreter; CUDA did not start: Error 304)", "sm_90a", "cpu")
    named = sandbox_named(failed, confined=True)
    assert named.device.startswith("CPU (Triton interpreter; CUDA did not start: Error 304; inside ktui's sandbox: ")
    assert "KTUI_NO_CONFINE=1" in named.device and named.device.endswith(")")
    assert sandbox_named(failed, confined=False) == failed
    plain = Tier("cpu", "CPU (Triton interpreter)", "sm_90a", "cpu")
    assert sandbox_named(plain, confined=True) == plain


def test_on_a_gpu_machine_proc_is_writable_with_truncation_as_the_driver_names_its_threads(tmp_path, places):
    """cuInit opens ``/proc/<pid>/task/<tid>/comm`` with O_TRUNC: from Landlock ABI 3 truncation is a
    right of its own, and without it CUDA fails to start (error 304) in every confined worker."""
    _, workspace = places
    runs, tmp, cache = workspace / ".ktui" / "runs", tmp_path / "private", tmp_path / "caches" / "triton"

    def proc_rights(gpu: bool) -> int:
        made = rules(7, [runs], [workspace], tmp, [cache], tmp_path / "tmp", network=False, gpu=gpu)
        return next(r.rights for r in made if r.path == Path("/proc"))

    assert proc_rights(gpu=True) & (landlock.WRITE_FILE | landlock.TRUNCATE) == landlock.WRITE_FILE | landlock.TRUNCATE
    assert proc_rights(gpu=False) == landlock.READ  # without a driver nothing there is written


def test_a_remote_base_holding_the_workspace_beside_its_runs_leaves_the_workspace_readable(tmp_path):
    """A remote's base is ``pkg/ ws/ runs/``: the folder holding ``runs`` also holds the workspace,
    so it is not a state folder (it would refuse the workspace whole); a local ``.ktui`` still is."""
    base = tmp_path / "remote"
    for folder in (base / "pkg", base / "ws" / "kernels", base / "ws" / "references", base / "runs"):
        folder.mkdir(parents=True)
    made = rules(7, [base / "runs"], [base / "ws"], tmp_path / "private", [], tmp_path / "tmp", network=False, gpu=False)
    read = {r.path for r in made if r.rights & landlock.READ_FILE}
    assert {base / "ws" / "kernels", base / "ws" / "references"} <= read
    assert base not in read and base / "pkg" not in read

    local = tmp_path / "ws"
    for folder in (local / "kernels", local / ".ktui" / "runs"):
        folder.mkdir(parents=True)
    (local / ".ktui" / "history.db").write_text("")
    made = rules(7, [local / ".ktui" / "runs"], [local], tmp_path / "private", [], tmp_path / "tmp", network=False,
                 gpu=False)
    read = {r.path for r in made if r.rights & landlock.READ_FILE}
    own = {local / ".ktui" / "runs", local / ".ktui" / "calibration.json"}  # its runs written, its calibration read
    assert local / "kernels" in read and not [p for p in read - own if local / ".ktui" in p.parents or p == local / ".ktui"]
