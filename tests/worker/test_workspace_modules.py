"""After a run the worker forgets the workspace's own modules, and only those.

A module dropped by mistake is imported again by the next run; for a native extension (CuTeDSL's
MLIR bindings) that aborts the worker: a CuTeDSL kernel after any other kernel crashed in a warm
worker whose virtual environment sat beside the workspace under a longer name.
"""

import sys

import pytest

from ktui.worker.modules import is_workspace_source, workspace_imports

pytestmark = pytest.mark.unit


def write_module(folder, name, body="VALUE = 1\n"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(body)
    return folder


def imported_inside(ws, folder, name):
    sys.path.insert(0, str(folder))
    try:
        with workspace_imports(str(ws), str(ws / "kernels")):
            __import__(name)
    finally:
        sys.path.remove(str(folder))
    return name in sys.modules


def test_a_workspace_helper_is_forgotten_after_the_run(tmp_path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    write_module(ws, "ktui_test_helper_a")
    assert not imported_inside(ws, ws, "ktui_test_helper_a")


def test_a_module_beside_the_workspace_whose_path_shares_its_name_is_kept(tmp_path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    venv = write_module(tmp_path / "ws-venv" / "lib" / "python3" / "site-packages", "ktui_test_beside")
    try:
        assert imported_inside(ws, venv, "ktui_test_beside")
    finally:
        sys.modules.pop("ktui_test_beside", None)


def test_a_package_installed_in_a_venv_inside_the_workspace_is_kept(tmp_path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    venv = write_module(ws / ".venv" / "lib" / "python3" / "site-packages", "ktui_test_installed")
    try:
        assert imported_inside(ws, venv, "ktui_test_installed")
    finally:
        sys.modules.pop("ktui_test_installed", None)


def test_an_extension_module_is_never_dropped(tmp_path):
    assert not is_workspace_source(str(tmp_path / "ws" / "native.cpython-311-x86_64-linux-gnu.so"), str(tmp_path / "ws"))
    assert is_workspace_source(str(tmp_path / "ws" / "helpers" / "h.py"), str(tmp_path / "ws"))
    assert not is_workspace_source(None, str(tmp_path / "ws"))
