"""``ktui``'s command table: listed without importing the commands, each command's own parser
when it runs."""

from __future__ import annotations

import platform
import re

import pytest
from conftest import REPO

from ktui.cli.commands import COMMANDS
from ktui.cli.main import build_parser, main

pytestmark = pytest.mark.unit


def test_the_listing_shows_each_command_as_its_own_module_describes_it():
    bare = build_parser(loaded=())
    assert bare.format_help() == build_parser().format_help()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_that_runs_gets_its_module_s_arguments(command):
    def parser_of(loaded):
        return build_parser(loaded)._subparsers._group_actions[0].choices[command]

    alone = parser_of([command])
    assert alone.format_help() == parser_of(COMMANDS).format_help()
    assert alone.format_help() != parser_of(()).format_help()  # the bare entry has none of its arguments


def test_version_says_ktuis_version_as_the_package_declares_it_and_the_python_running_it(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    declared = re.search(r'^version = "(.+)"$', (REPO / "pyproject.toml").read_text(), re.M).group(1)
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"ktui {declared} (Python {platform.python_version()}, ")


def test_a_bare_ktui_shows_every_command_and_a_bare_run_its_usage_and_what_to_give(capsys):
    assert main([]) == 2
    listing = capsys.readouterr().out
    assert all(f"    {command}" in listing for command in COMMANDS)
    with pytest.raises(SystemExit) as exited:
        main(["run"])
    said = capsys.readouterr().err
    assert exited.value.code == 2
    assert said.startswith("usage: ktui run ") and "ktui run: error: give the kernel files or folders to run, " \
                                                       "e.g. `ktui run kernels/`" in said


def test_a_kernel_outside_any_workspace_is_told_how_to_make_one(tmp_path, capsys, monkeypatch):
    (tmp_path / "k.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "k.py"]) == 2
    said = capsys.readouterr().err
    assert "k.py: no workspace found: no references/ or kernels/ folder here or above it" in said
    assert "`ktui init DIR` creates one" in said
