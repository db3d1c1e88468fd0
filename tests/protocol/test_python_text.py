"""A file's text as Python reads it: UTF-8 or its declared encoding; bytes that do not decode are
the error Python would raise, placed at their line and column."""

from __future__ import annotations

import pytest

from ktui.protocol.sourcelines import python_text

pytestmark = pytest.mark.unit


def test_the_text_python_reads_and_where_it_cannot():
    assert python_text("x = 'é'\n".encode(), "k.py") == ("x = 'é'\n", None)
    assert python_text(b"# coding: latin-1\nx = '\xe9'\n", "k.py") == ("# coding: latin-1\nx = 'é'\n", None)
    text, error = python_text(b"x = 1\ny = '\xff'", "k.py")
    assert text == "x = 1\ny = '\ufffd'" and (error.filename, error.lineno, error.offset) == ("k.py", 2, 6)
    assert error.msg.startswith("not valid UTF-8: byte 0xff (invalid start byte); Python cannot import this file")
    first = python_text(b"x = '\xff'", "k.py")[1]  # in the lines a coding line may be on
    assert (first.lineno, first.offset) == (1, 6)
    unknown = python_text(b"#!/usr/bin/env python\n# -*- coding: klingon -*-\n", "k.py")[1]
    assert "unknown encoding" in unknown.msg and (unknown.filename, unknown.lineno) == ("k.py", 2)
