"""``ktui context add`` and ``ktui context search``, never touching the network.

Offline sources copy what is installed; the network sources are pointed at a git repository and
an HTML page made here (``--url`` / ``KTUI_*`` variables); "offline" is a closed local port.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ktui

from ktui.agentdocs.index import ContextIndex
from ktui.agentdocs.sources import html_sections, ptx_isa_version, read_note

CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens, the connection is refused at once


@pytest.fixture(scope="module")
def triton_context(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctx")
    (root / "references").mkdir()  # a workspace: context/ goes beside it
    proc = ktui("context", "add", "triton", cwd=root)
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.mark.worker
def test_triton_sources_are_copied_with_a_source_note(triton_context):
    folder = triton_context / "context" / "triton"
    note = read_note(folder)
    assert note["source"] == "triton"
    assert note["version"] == importlib.metadata.version("triton")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", note["date"])
    assert "site-packages" in note["origin"] or "dist-packages" in note["origin"]
    assert "def program_id" in (folder / "triton" / "language" / "core.py").read_text()
    assert not list(folder.rglob("*.h")) and not list(folder.rglob("__pycache__"))


@pytest.mark.worker
def test_cutedsl_sources_are_copied_from_the_cutlass_dsl_wheel(tmp_path):
    proc = ktui("context", "add", "cutedsl", "--dir", str(tmp_path / "context"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "context" / "cutedsl"
    assert read_note(folder)["version"] == importlib.metadata.version("nvidia-cutlass-dsl")
    assert (folder / "cutlass" / "cute" / "__init__.py").is_file()
    assert int(read_note(folder)["files"]) == sum(1 for p in folder.rglob("*") if p.is_file() and p.name != "SOURCE")


@pytest.mark.worker
def test_tilelang_sources_are_copied_from_the_installed_package_without_its_copy_of_tvm(tmp_path):
    pytest.importorskip("tilelang", reason="tilelang not installed (pip install 'ktui[tilelang]')")
    proc = ktui("context", "add", "tilelang", "--dir", str(tmp_path / "context"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "context" / "tilelang"
    assert read_note(folder)["version"] == importlib.metadata.version("tilelang")
    assert "def gemm" in (folder / "tilelang" / "language" / "gemm_op.py").read_text()
    assert not (folder / "tilelang" / "3rdparty").exists()


@pytest.mark.worker
def test_search_prints_path_line_and_the_line_itself(triton_context):
    proc = ktui("context", "search", "program_id", "--limit", "5", cwd=triton_context)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert 1 <= len(lines) <= 5
    path, line, snippet = re.fullmatch(r"(.+?):(\d+): (.*)", lines[0]).groups()
    text = (triton_context / path).read_text().splitlines()[int(line) - 1]
    assert "program_id" in text and " ".join(text.split()).startswith(snippet.rstrip("…"))


@pytest.mark.worker
def test_search_json_is_one_object_per_match_for_agents(triton_context):
    proc = ktui("context", "search", "tl.dot", "input_precision", "--json", "--limit", "3", cwd=triton_context)
    records = [json.loads(x) for x in proc.stdout.splitlines()]
    assert records and all({"path", "line", "snippet", "score", "source", "file"} <= set(r) for r in records)
    assert all(r["source"] == "triton" and Path(r["file"]).is_file() for r in records)


@pytest.mark.worker
def test_a_query_with_no_match_exits_1(triton_context):
    proc = ktui("context", "search", "zzqqxxnotaword", cwd=triton_context)
    assert proc.returncode == 1 and "matches 'zzqqxxnotaword'" in proc.stderr, proc.stderr  # and what to add


@pytest.mark.unit
def test_the_index_follows_edits_additions_and_deletions_without_reindexing_the_rest(tmp_path):
    context = tmp_path / "context"
    (context / "notes").mkdir(parents=True)
    (context / "notes" / "a.md").write_text("alpha\n" * 50 + "swizzle pattern here\n")
    (context / "notes" / "b.py").write_text("def unrelated():\n    pass\n")
    index = ContextIndex(context)
    assert index.refresh().indexed == 2
    hit = index.search("swizzle")[0]
    assert (hit.path, hit.line, hit.snippet) == ("notes/a.md", 51, "swizzle pattern here")
    assert index.refresh().indexed == 0  # nothing changed: nothing read again

    (context / "notes" / "a.md").write_text("nothing of that kind\n")
    (context / "notes" / "c.txt").write_text("one\ntwo\nwarpgroup barrier\n")
    stats = index.refresh()
    assert (stats.indexed, stats.removed) == (2, 0)
    assert index.search("swizzle") == []
    assert [(h.path, h.line) for h in index.search("warpgroup")] == [("notes/c.txt", 3)]
    (context / "notes" / "c.txt").unlink()
    assert index.refresh().removed == 1 and index.search("warpgroup") == []
    index.close()


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=ktui", "-c", "user.email=ktui@example.invalid", *args],
                          cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    _git("init", "-q", cwd=path)
    _git("add", "-A", cwd=path)
    _git("commit", "-q", "-m", "fixture", cwd=path)
    _git("config", "uploadpack.allowFilter", "true", cwd=path)
    return _git("rev-parse", "HEAD", cwd=path).strip()


@pytest.mark.worker
def test_cutlass_is_a_sparse_clone_of_only_the_cute_parts(tmp_path):
    commit = make_repo(tmp_path / "cutlass", {
        "media/docs/cute/01_layout.md": "# CuTe Layouts\nA layout maps coordinates to indices.\n",
        "examples/python/CuTeDSL/hopper/dense_gemm.py": "import cutlass.cute as cute\n",
        "python/CuTeDSL/cutlass/cute/core.py": "def make_layout(shape, stride=None): ...\n",
        "include/cute/layout.hpp": "namespace cute { struct Layout; }\n",
        "include/cutlass/gemm/gemm.h": "// not CuTe\n",
        "tools/profiler/main.cpp": "int main() {}\n",
    })
    proc = ktui("context", "add", "cutlass", "--dir", str(tmp_path / "context"), cwd=tmp_path,
                env={"KTUI_CUTLASS_GIT": (tmp_path / "cutlass").as_uri()})
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "context" / "cutlass"
    copied = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert copied == ["SOURCE", "examples/python/CuTeDSL/hopper/dense_gemm.py", "include/cute/layout.hpp",
                      "media/docs/cute/01_layout.md", "python/CuTeDSL/cutlass/cute/core.py"]
    assert commit[:12] in read_note(folder)["version"]
    hits = ktui("context", "search", "layout", "--dir", str(tmp_path / "context"), cwd=tmp_path).stdout
    assert "include/cute/layout.hpp:1" in hits


@pytest.mark.worker
def test_triton_tutorials_come_from_the_url_given(tmp_path):
    make_repo(tmp_path / "triton", {
        "python/tutorials/01-vector-add.py": '"""Vector addition"""\n',
        "python/triton/language/core.py": "# not a tutorial\n",
    })
    proc = ktui("context", "add", "triton-tutorials", "--url", (tmp_path / "triton").as_uri(),
                "--dir", str(tmp_path / "context"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "context" / "triton-tutorials"
    assert (folder / "python" / "tutorials" / "01-vector-add.py").is_file()
    assert not (folder / "python" / "triton").exists()


PTX_PAGE = """<!DOCTYPE html><html><head><title>1. Introduction &mdash; PTX ISA 8.7 documentation</title>
<style>body { color: red }</style><script>var navigation = 1;</script></head><body>
<nav class="wy-nav-side"><ul><li>1. Introduction</li><li>9.7.1. Integer Arithmetic</li></ul></nav>
<div role="main"><section id="introduction"><h1>1. Introduction<a class="headerlink" href="#i">&#xf0c1;</a></h1>
<p>This document describes PTX, a low-level <em>parallel thread execution</em> virtual machine.</p>
<section><h2>1.1. Scalable Data-Parallel Computing</h2><p>GPUs &amp; their threads.</p></section></section>
<section><h3>9.7.1.1. Integer Arithmetic Instructions: add</h3><p>Add two values.</p>
<pre>add.type  d, a, b;
add.s32   r1, r2, r3;</pre><table><tr><td>.s32</td><td>signed</td></tr></table></section></div>
<footer>Copyright NVIDIA</footer></body></html>"""


@pytest.mark.worker
def test_the_ptx_isa_becomes_plain_text_sections_with_its_version(tmp_path):
    page = tmp_path / "ptx.html"
    page.write_text(PTX_PAGE)
    proc = ktui("context", "add", "ptx", "--dir", str(tmp_path / "context"), cwd=tmp_path,
                env={"KTUI_PTX_URL": page.as_uri()})
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "context" / "ptx"
    names = sorted(p.name for p in folder.glob("*.txt"))
    assert names == ["1-1.-introduction.txt", "2-1.1.-scalable-data-parallel-computing.txt",
                     "3-9.7.1.1.-integer-arithmetic-instructions-add.txt"]
    assert read_note(folder)["version"] == "PTX ISA 8.7"
    intro = (folder / names[0]).read_text()
    assert intro.startswith("1. Introduction\n") and "parallel thread execution virtual machine" in intro
    add = (folder / names[2]).read_text()
    assert "add.type  d, a, b;\nadd.s32   r1, r2, r3;" in add  # preformatted text keeps its lines
    everything = "".join(p.read_text() for p in folder.glob("*.txt"))
    assert "Copyright" not in everything and "navigation" not in everything and "color: red" not in everything


@pytest.mark.unit
def test_the_isa_version_is_read_from_the_title_or_the_page():
    assert ptx_isa_version("PTX ISA 9.0 documentation", "") == "9.0"
    assert ptx_isa_version("", "<p>PTX ISA Version 8.5 adds</p>") == "8.5"
    assert html_sections("<p>no headings</p>") == ([], "")


@pytest.mark.worker
@pytest.mark.parametrize(
    "source, env",
    [("ptx", {"KTUI_PTX_URL": f"{CLOSED}/ptx.html"}), ("cutlass", {"KTUI_CUTLASS_GIT": f"{CLOSED}/cutlass.git"})],
)
def test_offline_a_network_source_fails_fast_with_a_clear_message(tmp_path, source, env):
    # fast: an answer within the test's limit did not wait for the network's, an hour
    proc = ktui("context", "add", source, "--timeout", "3600", "--dir", str(tmp_path / "context"), cwd=tmp_path,
                env=env, timeout=300)
    assert proc.returncode == 2
    assert "needs the network" in proc.stderr and "triton, cutedsl and tilelang work offline" in proc.stderr
    assert not (tmp_path / "context" / source).exists()


@pytest.mark.worker
def test_unknown_sources_and_folders_ktui_did_not_make_are_refused(tmp_path):
    proc = ktui("context", "add", "cuda-samples", "--dir", str(tmp_path / "context"), cwd=tmp_path)
    assert proc.returncode == 2 and "unknown source 'cuda-samples'" in proc.stderr
    (tmp_path / "context" / "triton").mkdir(parents=True)
    (tmp_path / "context" / "triton" / "my-notes.md").write_text("mine")
    proc = ktui("context", "add", "triton", "--dir", str(tmp_path / "context"), cwd=tmp_path)
    assert proc.returncode == 2 and "was not made by ktui" in proc.stderr
    assert (tmp_path / "context" / "triton" / "my-notes.md").read_text() == "mine"


@pytest.mark.worker
def test_search_without_a_context_folder_says_how_to_fill_it(tmp_path):
    proc = ktui("context", "search", "anything", cwd=tmp_path)
    assert proc.returncode == 2 and "ktui context add triton" in proc.stderr


@pytest.fixture
def recording_git(tmp_path):
    """A ``git`` first on PATH that writes down its arguments and fails, as an unreachable host would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "git-args"
    (bin_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> {log}\necho "fatal: unreachable" >&2\nexit 128\n')
    (bin_dir / "git").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


@pytest.mark.worker
def test_a_url_reaches_git_after_double_dash_never_as_an_option(tmp_path, recording_git):
    env, log = recording_git
    url = "https://example.invalid/cutlass.git"
    proc = ktui("context", "add", "cutlass", "--url", url, "--dir", str(tmp_path / "context"), cwd=tmp_path, env=env)
    assert proc.returncode == 2
    args = log.read_text().splitlines()
    assert args[0] == "clone" and args[args.index(url) - 1] == "--"


@pytest.mark.worker
def test_an_option_shaped_url_is_refused_before_git_runs(tmp_path, recording_git):
    env, log = recording_git
    proc = ktui("context", "add", "cutlass", "--url=--upload-pack=touch pwned", "--dir", str(tmp_path / "context"),
                cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "is not a repository URL" in proc.stderr
    assert not log.exists() and not (tmp_path / "pwned").exists()
