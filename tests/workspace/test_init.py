"""``ktui init``: a workspace an agent can use from AGENTS.md alone, never clobbering files."""

from __future__ import annotations

import shutil

import pytest
from conftest import REPO, finished, ktui, parse_events

from ktui.workspace.scaffold import FILES, rendered, template


@pytest.mark.worker
def test_init_makes_a_workspace_whose_example_passes_the_loop(tmp_path, warm_ktui):
    proc = warm_ktui("init", "ws", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ws = tmp_path / "ws"
    assert {p.name for p in (ws / "context").iterdir() if p.is_dir()} == {"triton", "cutedsl", "tilelang"}  # offline, installed
    assert "ktui context add cutlass" in proc.stdout and "ktui context add ptx" in proc.stdout
    for rel in ("AGENTS.md", "CLAUDE.md", "references/add.py", "kernels/add_triton.py", "context/README.md"):
        assert (ws / rel).is_file(), rel
    assert ".ktui/" in (ws / ".gitignore").read_text().splitlines()
    assert "AGENTS.md" in (ws / "CLAUDE.md").read_text()
    run = warm_ktui("run", "--no-audit", "--json", "kernels/", cwd=ws)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert finished(parse_events(run.stdout))["verdict"] == "passed"
    # what AGENTS.md promises is where it is
    agents = (ws / "AGENTS.md").read_text()
    assert (ws / ".ktui" / "latest" / "add_triton.json").is_file() and ".ktui/latest/<kernel>.json" in agents
    assert (ws / ".ktui" / "runs" / "add_triton" / "1" / "add_kernel.sass").is_file() and ".ktui/runs/<kernel>/<version>/" in agents


@pytest.mark.unit
def test_agents_md_tells_the_loop_the_tiers_the_reference_rules_and_the_tools():
    agents = rendered("AGENTS.md")
    for needed in ("references/<op>.py", "kernels/", "custom_kernel", "generate_input", "ref_kernel", "TESTS",
                   "ktui run", "--json", "ktui diff", "ktui profile", "ktui context search", "ktui audit",
                   "fast wrong kernel is worthless",
                   "CPU tier", "`compiled`", "interpreter",  # what a verdict means without a GPU
                   "ktui init` filled it", "ktui context add cutlass", "ktui context add ptx",  # context/
                   "TOLERANCES = {", "manual_seed(seed)", "inputs are all",  # a new reference's rules
                   "@cute.kernel", "@cute.jit", "`audit`", "`output`", "`hotspots`"):
        assert needed in agents, needed
    assert len(agents.splitlines()) < 170


@pytest.mark.unit
def test_init_refuses_to_overwrite_and_writes_nothing_unless_forced(tmp_path, warm_ktui):
    assert warm_ktui("init", cwd=tmp_path).returncode == 0
    (tmp_path / "AGENTS.md").write_text("my own notes\n")
    (tmp_path / "kernels" / "add_triton.py").unlink()
    proc = warm_ktui("init", cwd=tmp_path)
    assert proc.returncode == 2
    assert "AGENTS.md" in proc.stderr and "--force" in proc.stderr
    assert (tmp_path / "AGENTS.md").read_text() == "my own notes\n"
    assert not (tmp_path / "kernels" / "add_triton.py").exists()  # nothing at all was written
    assert warm_ktui("init", "--force", cwd=tmp_path).returncode == 0
    assert (tmp_path / "AGENTS.md").read_text() == rendered("AGENTS.md")


@pytest.mark.unit
def test_an_existing_gitignore_keeps_its_lines_and_gets_ktui_once(tmp_path, warm_ktui):
    (tmp_path / ".gitignore").write_text("*.pyc\nbuild/")
    assert warm_ktui("init", cwd=tmp_path).returncode == 0
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\nbuild/\n.ktui/\n"
    assert warm_ktui("init", "--force", cwd=tmp_path).returncode == 0
    assert (tmp_path / ".gitignore").read_text().count(".ktui/") == 1


@pytest.mark.unit
def test_the_worked_example_is_the_shipped_one():
    """The templates are copies (they must install with the package); they may not drift."""
    shipped = {"references/add.py": "references/add.py", "kernels/add_triton.py": "kernels/add_triton.py",
               "context/README.md": "context/README.md"}
    for rel, repo_path in shipped.items():
        assert template(FILES[rel]) == (REPO / repo_path).read_text(), rel


@pytest.mark.worker
def test_init_without_ktui_on_path_says_how_to_start_the_committed_mcp_json_and_no_context_leaves_it_empty(tmp_path):
    if shutil.which("ktui", path="/usr/bin:/bin"):
        pytest.skip("ktui is installed in /usr/bin or /bin")
    proc = ktui("init", "ws", "--no-context", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert "`ktui` is not on PATH" in proc.stdout and "claude mcp add ktui -- " in proc.stdout, proc.stdout
    assert [p.name for p in (tmp_path / "ws" / "context").iterdir()] == ["README.md"]


@pytest.mark.unit
def test_the_loop_is_written_once_for_every_agent_init_configures(tmp_path):
    from ktui.workspace.scaffold import init_workspace, loop_text

    init_workspace(tmp_path / "ws", python="/venv/bin/python")
    ws = tmp_path / "ws"
    loop = loop_text().rstrip("\n")
    claude = (ws / ".claude" / "skills" / "ktui-loop" / "SKILL.md").read_text()
    cursor = (ws / ".cursor" / "rules" / "ktui-loop.mdc").read_text()
    codex = (ws / "AGENTS.md").read_text()  # what Codex reads; .codex/config.toml starts the server
    for written in (claude, cursor, codex):
        assert loop in written
    assert claude.startswith("---\nname: ktui-loop\ndescription: ") and "TileLang" in claude.split("---")[1]
    assert cursor.startswith("---\ndescription: ") and "globs: kernels/**/*.py,references/**/*.py" in cursor
    assert '"/venv/bin/python"' in (ws / ".codex" / "config.toml").read_text()
    for needed in ("@tilelang.jit", "`trusted`", '`"pending"`', "`kernels`", "`calibrate`", "`pin`",
                   "`satisfied: true`", "`trusted: true`", "never fix it yourself"):
        assert needed in loop, needed
