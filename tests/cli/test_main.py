"""``ktui``'s command table: listed without importing the commands, each command's own parser
when it runs."""

from __future__ import annotations

import pytest

from ktui.cli.commands import COMMANDS
from ktui.cli.main import build_parser

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
