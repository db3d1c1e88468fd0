"""The parent parses Python text only under one lock: CPython 3.11's parser fails when two threads
parse at once ("AST constructor recursion depth mismatch"), and the run queue runs one thread per
GPU, each snapshotting its kernel's reference and the modules it imports."""

import re
import threading
from pathlib import Path

import pytest

from ktui.protocol import sourcelines

pytestmark = pytest.mark.unit

PACKAGE = Path(sourcelines.__file__).resolve().parent.parent
PARENT = [p for p in PACKAGE.rglob("*.py") if "worker" not in p.relative_to(PACKAGE).parts[:1]]


def test_no_parent_module_calls_the_parser_but_through_the_lock():
    direct = [f"{p.relative_to(PACKAGE)}:{n}" for p in PARENT if p.name != "sourcelines.py"
              for n, line in enumerate(p.read_text().splitlines(), 1)
              if re.search(r"\bast\.parse\(|\bcompile\([^)]*['\"]exec['\"]", line)]
    assert direct == [], "parse through ktui.protocol.sourcelines.parse (it holds PARSING)"


def test_a_parse_waits_while_another_thread_holds_the_lock():
    parsed = threading.Event()
    with sourcelines.PARSING:
        thread = threading.Thread(target=lambda: (sourcelines.parse("x = 1\n"), parsed.set()))
        thread.start()
        assert not parsed.wait(0.2)
    thread.join(120)  # a safety net
    assert parsed.is_set()
