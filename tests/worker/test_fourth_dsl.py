"""A fourth DSL, added as another package would add one: no file of ktui changes.

``tests/fixtures/toydsl`` holds ToyLang (``toylang``: a kernel language that runs anywhere), its
row and adapter for ktui (``toylang_ktui``) and the metadata pip would install
(``toylang-0.1.dist-info``: an entry point of the group ``ktui.dsls``). Putting that folder on
``PYTHONPATH`` installs it; then the worker finds, compiles, dumps, counts and judges its kernels on
the CPU tier, lets it write its compiler cache among ktui's and places its compile errors, and the parent's tables (the dump kinds, ``ktui context
add``, ``ktui remote check``) list it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, by_kernel, finished, ktui, make_workspace, parse_events, rungs

from ktui.protocol.statedir import compiler_caches

pytestmark = pytest.mark.worker

TOYDSL = FIXTURES / "toydsl"
INSTALLED = {"PYTHONPATH": os.pathsep.join([str(REPO), str(TOYDSL)])}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """A workspace of ToyLang kernels and one without any kernel, run once on the CPU tier."""
    root = make_workspace(tmp_path_factory.mktemp("toy") / "ws")
    for kernel in (TOYDSL / "kernels").glob("*.py"):
        shutil.copy(kernel, root / "kernels" / kernel.name)
    (root / "kernels" / "add_torch.py").write_text(
        'REFERENCE = "add"\n\n\ndef custom_kernel(x, y):\n    return x + y\n')
    proc = ktui("run", "--json", "--cpu", "--no-audit", "kernels", cwd=root, env=INSTALLED)
    return root, by_kernel(parse_events(proc.stdout))


def test_the_worker_finds_compiles_dumps_and_judges_a_kernel_of_a_dsl_installed_as_a_package(ran):
    events = ran[1]["add_toylang"]
    steps = rungs(events)
    assert steps["pre-checks"]["figures"]["toylang_kernels"] == ["add_kernel"]
    assert steps["compile"]["figures"]["functions"] == ["add_kernel"]
    dumped = [e for e in events if e["type"] == "artifact" and e["kind"] == "toyir"]
    assert [Path(e["path"]).name for e in dumped] == ["add_kernel.toyir"]
    assert "toy.func @add_kernel(tensor<float32>, tensor<float32>, tensor<float32>, int)" in Path(
        dumped[0]["path"]).read_text()
    assert steps["correctness[size=1048576]"]["status"] == steps["integrity"]["status"] == "ok"
    # its launches were counted, and made no-ops they left the answer wrong: it came from them
    assert steps["dependence"]["status"] == "ok" and "wrong" in steps["dependence"]["message"]
    assert finished(events)["verdict"] == "passed"


def test_its_compiler_cache_is_among_ktuis_the_one_place_a_confined_worker_may_write_it(ran):
    events = ran[1]["add_toylang"]
    assert next(e for e in events if e["type"] == "run_started")["confined"] is True
    cached = list((compiler_caches() / "toylang").glob("add_kernel-*.toyir"))
    assert cached and cached[0].read_text().startswith("toy.func @add_kernel(")


def test_its_compile_error_is_placed_at_the_users_line_by_its_adapter(ran):
    failed = rungs(ran[1]["add_toylang_while"])["compile"]
    assert failed["status"] == "failed" and "ToyLang has no while loop" in failed["message"]
    location = failed["error"]["location"]
    assert Path(location["file"]).name == "add_toylang_while.py" and location["line"] == 12


def test_a_file_without_kernels_is_refused_naming_the_fourth_dsl_among_the_others(ran):
    refused = rungs(ran[1]["add_torch"])["pre-checks"]
    assert refused["status"] == "failed"
    assert "TileLang (@tilelang.jit) or ToyLang (@toylang.jit) kernel" in refused["message"]


PARENT_TABLES = r"""
import json, sys
from pathlib import Path
from ktui.agents.dumps import KINDS, read_dump
from ktui.agentdocs.sources import offline_sources
from ktui.dispatch.remote.check import check_lines, needed_to_run
from ktui.protocol.dsls import dump_suffixes
lines = check_lines({"python": "3", "executable": "python3", "torch": "2", "triton": "3"}, "gpu-host", "python3")
print(json.dumps({
    "kinds": list(KINDS), "suffixes": sorted(dump_suffixes()), "offline": offline_sources(),
    "check": {line.name: [line.ok, line.text] for line in lines}, "needed": sorted(needed_to_run()),
    "dump": read_dump(Path(sys.argv[1]), "toyir", None, 0, 1000)["text"],
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "toylang") or m.startswith("ktui.worker"))}))
"""


def test_the_parents_tables_list_it_without_loading_torch_or_the_dsl(ran):
    root, _ = ran
    proc = subprocess.run([sys.executable, "-c", PARENT_TABLES, str(root / ".ktui" / "runs" / "add_toylang" / "1")],
                          capture_output=True, text=True, env={**os.environ, **INSTALLED}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tables = json.loads(proc.stdout)
    assert "toyir" in tables["kinds"] and ".toyir" in tables["suffixes"]
    assert tables["dump"].startswith("toy.func @add_kernel(")  # the MCP dump tool reads its kind
    assert tables["offline"]["toylang"] == "toylang"
    # said, with its fix, and not needed for a run there
    assert tables["check"]["toylang"] == [True, "not installed (fix: ssh gpu-host python3 -m pip install toylang)"]
    assert tables["needed"] == ["python", "torch", "triton"]
    assert tables["modules"] == []  # the row is read from toylang_ktui alone


def test_ktui_context_add_copies_its_installed_package(tmp_path):
    proc = ktui("context", "add", "toylang", "--dir", str(tmp_path / "context"), cwd=tmp_path, env=INSTALLED)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "context" / "toylang"
    assert "def program_id" in (folder / "toylang" / "__init__.py").read_text()
    assert "installed Python package toylang 0.1" in (folder / "SOURCE").read_text()
