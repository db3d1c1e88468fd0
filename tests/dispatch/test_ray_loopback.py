"""A Ray instance ktui starts (``--ray`` with no address) is this machine's alone: every port of
it — the GCS, the raylet, the driver, the actors' workers — listens on loopback, read from the
kernel's socket table while a real ``ktui run --ray`` runs a kernel on its actor."""

from __future__ import annotations

import ipaddress
import json
import signal
import socket
import subprocess
import sys

import pytest
from conftest import child_env, make_workspace

psutil = pytest.importorskip("psutil")
pytest.importorskip("ray")

pytestmark = pytest.mark.e2e


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def test_a_ray_instance_ktui_starts_listens_on_loopback_only(tmp_path):
    ws = make_workspace(tmp_path / "ws", fixtures=["hang"])
    proc = subprocess.Popen([sys.executable, "-m", "ktui", "run", "--no-audit", "--json", "--no-bench", "--cpu",
                             "--timeout", "compile=600", "kernels/hang.py", "--ray"], cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env({"RAY_ADDRESS": ""}))
    try:
        for line in proc.stdout:  # the kernel hangs in its compile rung, on its actor: the instance is whole
            event = json.loads(line)
            if event["type"] == "rung_finished" and event["rung"] == "pre-checks":
                break
        else:
            pytest.fail(f"ktui run --ray ended before its kernel ran: {proc.wait()} {proc.stderr.read()[-3000:]}")
        tree = {p.pid: p for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]}
        bound = [(c.laddr.ip, c.laddr.port, c.pid) for c in psutil.net_connections("inet")
                 if c.pid in tree and c.laddr and (c.status == psutil.CONN_LISTEN or c.type == socket.SOCK_DGRAM)]
        names = {pid: tree[pid].cmdline()[0].split()[0].rsplit("/", 1)[-1] for _, _, pid in bound}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    assert {"gcs_server", "raylet", "ray::EvalWorker"} <= set(names.values()) and proc.pid in names, names
    exposed = [(ip, port, names[pid]) for ip, port, pid in bound if not _loopback(ip)]
    assert exposed == [], exposed
