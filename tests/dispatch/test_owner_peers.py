"""A kernel under test cannot drive the workspace's owner: it reaches the socket and reads the token
(this user's files), but the owner refuses a process that runs inside one of ktui's workers
(CPU tier, real processes: the one-shot owner of ``ktui run --no-daemon`` and the daemon)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, child_env, make_workspace, parse_events

from ktui.history.store import Store
from ktui.workspace.kernels import state_dir

pytestmark = pytest.mark.worker

# At import, the kernel submits itself to the owner of its workspace, as a hostile one would (it
# read the token as any process of the user can today), and prints the owner's first answer.
SUBMITS_ITSELF = textwrap.dedent('''
    import json as _json, socket as _socket
    from pathlib import Path as _Path
    _state = _Path(__file__).resolve().parents[1] / ".ktui" / "owner"
    try:
        _token = (_state / "token").read_text().strip()
    except OSError as _exc:
        _token = ""
        print("SUBMIT token unreadable:", _exc)
    _sock = _socket.socket(_socket.AF_UNIX)
    try:
        _sock.connect(str(_state / "socket"))
        _sock.sendall((_json.dumps({"type": "run_request", "token": _token, "paths": [__file__],
                                    "options": {"force_cpu": True, "benchmark": False},
                                    "placement": {"cpu": True}}) + "\\n").encode())
        print("SUBMIT answer:", _sock.makefile().readline().strip())
    except OSError as _exc:
        print("SUBMIT could not connect:", _exc)
    finally:
        _sock.close()
''')


@pytest.mark.parametrize("daemon", [False, True], ids=["one-shot owner", "daemon"])
def test_a_kernel_that_submits_itself_to_the_owner_is_refused_and_runs_once(tmp_path, daemon):
    ws = make_workspace(tmp_path / "ws")
    (ws / "kernels" / "submits_itself.py").write_text((REPO / "kernels" / "add_triton.py").read_text() + SUBMITS_ITSELF)
    env = child_env({"KTUI_NO_DAEMON": "0" if daemon else "1"})
    try:
        proc = subprocess.run([sys.executable, "-m", "ktui", "run", "kernels/submits_itself.py", "--json", "--cpu",
                               "--no-bench", "--no-audit", "--no-fresh-shapes"], cwd=ws, capture_output=True, text=True,
                              env=env, timeout=600)
    finally:
        if daemon:
            subprocess.run([sys.executable, "-m", "ktui", "serve", "--stop"], cwd=ws, env=env, capture_output=True,
                           timeout=120)
    said = [e["text"] for e in parse_events(proc.stdout) if e["type"] == "output" and e["text"].startswith("SUBMIT")]
    assert said, proc.stdout[-2000:] + proc.stderr
    answers = [json_answer(line) for line in said if line.startswith("SUBMIT answer:")]
    assert answers and all(a["type"] == "owner_error" and "runs inside a ktui worker" in a["message"] for a in answers), said
    assert proc.returncode == 0, proc.stderr
    store = Store.of(state_dir(ws))
    try:
        assert len(store.runs("submits_itself")) == 1, "the kernel's own submission ran nothing"
    finally:
        store.close()


def json_answer(line: str) -> dict:
    return json.loads(line.split(":", 1)[1])
