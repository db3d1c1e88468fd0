"""``ktui profile``, ``sanitize``, ``calibrate`` and ``diff`` with ``--remote``, over a real OpenSSH
server on loopback (the "remote" is this machine, reached through ssh, its Python this one)."""

import stat
import sys
from pathlib import Path

import pytest
from conftest import REPO, ktui, make_workspace, parse_events
from sshd import make_sshd
from waits import until

from ktui.dispatch.remote.address import parse_remote
from ktui.dispatch.remote.runner import RemoteRunner
from ktui.dispatch.session import Session
from ktui.profiling.external import ToolFailed, prepare
from ktui.profiling.hosts import RemoteHost
from ktui.profiling.profile import ProfileOptions, run_ncu
from ktui.protocol.job import Options
from ktui.workspace.kernels import kernel_at

pytestmark = pytest.mark.e2e

HOSTILE = "-x $(touch PWNED) it's \"q\" `id`.py"
HOSTILE_DIR = "-remote $(touch PWNED) 'it's'"
SYSTEM_TOOLS = [Path("/usr/local/cuda/bin/ncu"), Path("/usr/local/cuda/bin/compute-sanitizer"),
                *Path("/opt/nvidia").glob("nsight-compute/*/ncu")]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = make_sshd(tmp_path_factory.mktemp("sshd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def ws(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["softmax_triton"])
    (root / "kernels" / HOSTILE).write_text((root / "kernels" / "softmax_triton.py").read_text())
    (root / "references" / HOSTILE).write_text((root / "references" / "softmax.py").read_text())
    return root


def _script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def flags(config: Path, tmp_path: Path, folder: str = "remote") -> list[str]:
    return ["--remote", f"localhost:{tmp_path}/{folder}", "--ssh-config", str(config), "--remote-python", sys.executable]


def _config_with(sshd, tmp_path: Path, **env: str) -> Path:
    """The client config, sending ``env`` to the remote session (the server accepts KTUI_NCU…)."""
    config = tmp_path / "ssh_config_env"
    pairs = " ".join(f"{k}={v}" for k, v in env.items())
    config.write_text(sshd.client_config.read_text().replace("Host *\n", f"Host *\n  SetEnv {pairs}\n"))
    return config


def _no_pwned(tmp_path: Path) -> bool:
    return not list(tmp_path.rglob("PWNED")) and not (Path.home() / "PWNED").exists()


def test_profile_over_remote_without_ncu_there_says_so_naming_the_host(sshd, ws, tmp_path):
    if any(p.exists() for p in SYSTEM_TOOLS):
        pytest.skip("this machine has NVIDIA's tools installed")
    here = _script(tmp_path / "bin", "ncu", "exit 0\n")  # an ncu here: the message must be the remote's
    proc = ktui("profile", f"kernels/{HOSTILE}", "--json", *flags(sshd.client_config, tmp_path, HOSTILE_DIR),
                cwd=ws, env={"KTUI_NCU": str(here)}, timeout=180)
    assert proc.returncode == 1, proc.stderr
    (line,) = [e for e in parse_events(proc.stdout) if e["type"] == "profile_finished"]
    assert line["ok"] is False
    assert line["message"].startswith("on localhost: ncu (Nsight Compute) is not installed"), line["message"]
    assert _no_pwned(tmp_path)


def test_sanitize_over_remote_without_compute_sanitizer_there_says_so_naming_the_host(sshd, ws, tmp_path):
    if any(p.exists() for p in SYSTEM_TOOLS):
        pytest.skip("this machine has NVIDIA's tools installed")
    here = _script(tmp_path / "bin", "compute-sanitizer", "exit 0\n")
    proc = ktui("sanitize", "kernels/softmax_triton.py", *flags(sshd.client_config, tmp_path), cwd=ws,
                env={"KTUI_COMPUTE_SANITIZER": str(here)}, timeout=180)
    assert proc.returncode == 1
    assert "ktui: on localhost: compute-sanitizer is not installed" in proc.stderr, proc.stderr


def test_profile_on_a_cpu_only_remote_loads_the_kernel_there_and_says_it_has_no_gpu(sshd, ws, tmp_path):
    fake = _script(tmp_path / "remote-bin", "ncu", "exit 0\n")
    config = _config_with(sshd, tmp_path, KTUI_NCU=str(fake))
    proc = ktui("profile", f"kernels/{HOSTILE}", "--json", *flags(config, tmp_path, HOSTILE_DIR), cwd=ws, timeout=300)
    assert proc.returncode == 1, proc.stderr
    (line,) = [e for e in parse_events(proc.stdout) if e["type"] == "profile_finished"]
    assert line["message"].startswith("no GPU: ncu profiling needs a CUDA GPU and none is visible on localhost"), \
        line["message"]
    assert "it loads on localhost: softmax_kernel" in line["message"]  # the pre-flight ran there
    assert "give --remote a GPU host" in line["message"]
    assert _no_pwned(tmp_path)


@pytest.fixture
def remote_target(sshd, ws, tmp_path):
    runner = RemoteRunner(parse_remote(f"localhost:{tmp_path}/remote"), ssh_config=str(sshd.client_config),
                          python=sys.executable)
    target = prepare(ws / "kernels" / "softmax_triton.py", host=RemoteHost(runner))
    target.check = {"shape": {"rows": 4096, "cols": 4096}, "tier": "gpu"}
    yield target
    target.close()


def test_a_remote_ncus_report_and_log_land_in_the_local_run_folder_with_local_paths(remote_target, tmp_path):
    """A fake ncu on the remote writes its report where it is told, then fails as a crashed replay."""
    fake = _script(tmp_path / "remote-bin", "ncu",
                   'while [ "$1" != "--export" ]; do shift; done\n'
                   'printf report > "$2.ncu-rep"\n'
                   'echo "==PROF== report $2.ncu-rep"\n'
                   "echo '==ERROR== The application returned an error code (11).'\nexit 11\n")
    with pytest.raises(ToolFailed, match=r"crashed under ncu \(exit code 11\)"):
        run_ncu(remote_target, str(fake), ProfileOptions(timeout_s=60))
    report = remote_target.run_dir / "profile.ncu-rep"
    assert report.read_text() == "report"  # where a local profile leaves it: .ktui/runs/<kernel>/<version>/
    assert remote_target.run_dir.parent.parent == remote_target.state / "runs"
    log = (remote_target.run_dir / "ncu.log").read_text()
    assert f"==PROF== report {report}" in log and str(tmp_path / "remote") not in log
    assert not (tmp_path / "remote").exists() or not list((tmp_path / "remote").rglob("profile.ncu-rep"))


def test_a_hung_tool_on_the_remote_is_killed_with_its_children_at_the_time_limit(remote_target, tmp_path):
    pid_file = tmp_path / "child.pid"
    # an hour's sleep: ending at all, the tool was ended by its 2 s limit
    fake = _script(tmp_path / "remote-bin", "ncu", f"sleep 3600 &\necho $! > {pid_file}\nsleep 3600\n")
    with pytest.raises(ToolFailed, match=r"exceeded its 2 s limit"):
        run_ncu(remote_target, str(fake), ProfileOptions(timeout_s=2))
    child = int(until(pid_file.read_text))
    assert until(lambda: not _alive(child))


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_calibrate_on_a_cpu_only_remote_says_there_is_no_gpu_there(sshd, tmp_path):
    root = make_workspace(tmp_path / "ws")
    proc = ktui("calibrate", *flags(sshd.client_config, tmp_path), cwd=root, timeout=300)
    assert proc.returncode == 2
    assert "there is none on localhost" in proc.stderr and "torch.cuda.is_available() is False there" in proc.stderr
    assert not (root / ".ktui" / "calibration.json").exists()


def test_calibrate_of_an_unreachable_remote_says_so(tmp_path):
    server = make_sshd(tmp_path / "never-started")
    root = make_workspace(tmp_path / "ws")
    proc = ktui("calibrate", *flags(server.client_config, tmp_path), cwd=root, timeout=120)
    assert proc.returncode == 2 and "cannot reach localhost over ssh" in proc.stderr


def test_a_local_calibration_is_sent_with_a_remote_run(sshd, tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    (root / ".ktui").mkdir(exist_ok=True)
    (root / ".ktui" / "calibration.json").write_text('{"H200 | driver 1": {}}')
    runner = RemoteRunner(parse_remote(f"localhost:{tmp_path}/remote"), ssh_config=str(sshd.client_config),
                          python=sys.executable, sync="tar")
    session = Session(root, runner=runner)
    try:
        staged = runner.stage(session.prepare(kernel_at(root / "kernels" / "add_triton.py"), Options()))
        there = Path(staged.base) / "ws" / ".ktui" / "calibration.json"
        assert there.read_text() == '{"H200 | driver 1": {}}'
    finally:
        session.close()


@pytest.fixture(scope="module")
def one_version(tmp_path_factory):
    """add_triton run once here (v1); the file then changed (BLOCK 512), not run."""
    root = make_workspace(tmp_path_factory.mktemp("ws"), kernels=["add_triton"])
    assert ktui("run", "--no-audit", "--seed", "1", "--no-bench", "kernels/add_triton.py", cwd=root).returncode == 0
    kernel = root / "kernels" / "add_triton.py"
    kernel.write_text(kernel.read_text().replace("block = 1024", "block = 512"))
    return root


def test_diff_over_remote_compiles_the_unrun_content_there_and_diffs_here(sshd, one_version, tmp_path):
    proc = ktui("diff", "kernels/add_triton.py", "--json", *flags(sshd.client_config, tmp_path), cwd=one_version,
                timeout=300)
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert (out["base_version"], out["new_version"]) == (1, 2), out
    assert list((one_version / ".ktui" / "runs" / "add_triton" / "2").glob("*.sass"))  # landed here
    assert "note: localhost has no GPU: its CPU tier compiled the SASS ahead of time for sm_90a" in proc.stderr


def test_diff_of_versions_already_stored_here_never_contacts_the_remote(one_version, tmp_path):
    server = make_sshd(tmp_path / "never-started")  # unreachable: any contact would fail the diff
    proc = ktui("diff", "kernels/add_triton.py", "--version", "1", "--base", "1",
                *flags(server.client_config, tmp_path), cwd=one_version, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "cannot reach" not in proc.stderr and "compiling" not in proc.stderr


def test_diff_over_an_unreachable_remote_of_unrun_content_says_it_cannot_reach_it(tmp_path):
    root = make_workspace(tmp_path / "ws", kernels=["add_triton"])
    server = make_sshd(tmp_path / "never-started")
    proc = ktui("diff", "kernels/add_triton.py", *flags(server.client_config, tmp_path), cwd=root, timeout=120)
    assert proc.returncode == 2
    assert "could not be compiled on localhost" in proc.stderr and "cannot reach localhost over ssh" in proc.stderr


def test_the_remote_flags_reach_every_inspecting_command(tmp_path):
    for command in ("profile", "sanitize", "calibrate", "diff"):
        proc = ktui(command, "--help", cwd=tmp_path)
        assert "--remote [USER@]HOST[:PORT][:/DIR]" in proc.stdout and "--remote-python" in proc.stdout, command
    proc = ktui("profile", "x.py", "--remote=-oProxyCommand=touch PWNED", cwd=tmp_path)
    assert proc.returncode == 2 and "is not a host name" in proc.stderr
    assert not (tmp_path / "PWNED").exists()
    assert REPO.is_dir()
