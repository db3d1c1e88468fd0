"""Every command's help: each option explained, its default said, shared options worded once."""

from __future__ import annotations

import argparse
from collections import defaultdict

import pytest

from ktui.cli.main import build_parser

pytestmark = pytest.mark.unit

# Options several commands take with a meaning of their own in each (what --json prints, what
# --remote runs there, what a command's --timeout limits, ktui --version beside ktui diff --version);
# every other shared option is worded once.
OWN_MEANING_IN_EACH = {"--json", "--strict", "-v", "--verbose", "--no-audit", "--warmup", "--remote", "--limit",
                       "--timeout", "--reference", "--arch", "--seed", "--version"}


def every_option(parser: argparse.ArgumentParser, command: str = "ktui"):
    """(the command's words, the action) for every argument of every command and subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                assert listed.get(name), f"{command} {name} has no summary in {command} --help"
                yield from every_option(sub, f"{command} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield command, action


def name_of(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or action.dest


def test_every_option_of_every_command_has_help():
    missing = [f"{command} {name_of(a)}" for command, a in every_option(build_parser())
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


def test_every_option_with_a_default_says_it_in_its_help():
    silent = [f"{command} {name_of(a)} (default {a.default!r})" for command, a in every_option(build_parser())
              if a.default not in (None, False, argparse.SUPPRESS) and "default" not in a.help]
    assert silent == []


def test_timeout_is_a_time_limit_in_seconds_in_every_command():
    helps = {command: a.help for command, a in every_option(build_parser()) if "--timeout" in a.option_strings}
    assert len(helps) >= 5
    assert {command: h for command, h in helps.items() if not h.startswith("time limit in seconds for ")} == {}


def test_an_option_shared_by_several_commands_is_described_the_same_in_each():
    helps: dict[str, dict[str, str]] = defaultdict(dict)
    for command, a in every_option(build_parser()):
        for flag in a.option_strings:
            helps[flag][command] = a.help
    shared = {flag: by_command for flag, by_command in helps.items() if len(by_command) > 1}
    assert {"--state-dir", "--cpu", "--remote-python", "--ssh-config", "--gpus"} <= set(shared)
    drifted = {flag: by_command for flag, by_command in shared.items()
               if flag not in OWN_MEANING_IN_EACH and len(set(by_command.values())) > 1}
    assert drifted == {}
