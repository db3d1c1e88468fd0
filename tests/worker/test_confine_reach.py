"""A kernel under test can compute, and nothing else: it cannot read the user's secrets, its
workspace's history and owner token or another workspace, cannot reach the network unless the user
allows it (``--allow-network``), write /dev/shm or signal the process that started its worker — and
its run still gets its verdict, and says which protections held."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from conftest import finished, ktui, make_workspace, parse_events

from ktui.protocol.processes import NO_CONFINE_ENV
from ktui.worker.confine import landlock_abi
from ktui.worker.confine.landlock import SCOPES_ABI

pytestmark = pytest.mark.worker

HACK = "hack_reaches_out"


def _abi() -> int:
    try:
        return landlock_abi()
    except OSError:
        return 0


needs_landlock = pytest.mark.skipif(_abi() < 1, reason="this kernel has no Landlock")


@pytest.fixture
def reach(tmp_path):
    """A workspace with the hack, the user's secrets beside it, and a TCP port listening for it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("the user's key\n")
    root = make_workspace(tmp_path / "ws", hacks=["reaches_out"])
    (root / ".ktui" / "owner").mkdir(parents=True)
    (root / ".ktui" / "owner" / "token").write_text("the owner's token\n")
    (tmp_path / "other" / "kernels").mkdir(parents=True)
    (tmp_path / "other" / "kernels" / "secret.py").write_text("# another workspace's kernel\n")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    (root / "kernels" / f"{HACK}.port").write_text(str(listener.getsockname()[1]))
    yield root, {"HOME": str(home), NO_CONFINE_ENV: ""}, listener
    listener.close()


def _run(root: Path, env: dict, *flags: str) -> tuple[list[dict], dict[str, str]]:
    proc = ktui("run", "--no-audit", "--json", "--no-bench", *flags, f"kernels/{HACK}.py", cwd=root, env=env)
    events = parse_events(proc.stdout)
    assert events, proc.stderr[-3000:]
    reached = {}
    for event in events:
        if event["type"] == "output" and event["text"].startswith("reach "):
            name, _, outcome = event["text"].removeprefix("reach ").partition(": ")
            reached[name] = outcome
    return events, reached


def _accepted(listener: socket.socket) -> bool:
    try:
        listener.accept()[0].close()
        return True
    except (TimeoutError, OSError):
        return False


@needs_landlock
def test_a_kernel_reaches_nothing_outside_what_building_and_running_it_needs(reach):
    root, env, listener = reach
    events, reached = _run(root, env)
    assert reached["ssh key"] == "PermissionError"
    assert reached["shadow"] == "PermissionError"
    assert reached["history"] == "PermissionError" and reached["owner token"] == "PermissionError"
    assert reached["other workspace"] == "PermissionError"
    assert reached["tcp"] == "OSError" and reached["udp"] == "OSError"  # no socket but a Unix one
    assert not _accepted(listener)
    assert reached["shm"] == "PermissionError"
    if _abi() >= SCOPES_ABI:
        assert reached["signal"] == "PermissionError"
    assert finished(events)["verdict"] == "passed"  # and it is judged as any kernel
    said = [events[0]["confinement"], finished(events)["summary"]["confinement"]]
    assert said[0] == said[1] and said[0].startswith(f"landlock ABI {_abi()}: writes, reads, network"), said


@needs_landlock
def test_the_network_opens_only_when_the_user_allows_it_and_the_run_says_so(reach):
    root, env, listener = reach
    events, reached = _run(root, env, "--allow-network")
    assert reached["tcp"] == "ok" and reached["udp"] == "ok"
    assert _accepted(listener)
    assert reached["ssh key"] == "PermissionError" and reached["owner token"] == "PermissionError"
    assert events[0]["confinement"].endswith("; network allowed: --allow-network")  # the lines then name it
    assert finished(events)["verdict"] == "passed"
