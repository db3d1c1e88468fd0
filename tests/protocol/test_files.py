"""A file another process may read at any moment is replaced whole, text or bytes, or not at all."""

from __future__ import annotations

import pytest

from ktui.protocol.files import write_atomic

pytestmark = pytest.mark.unit


def test_text_and_bytes_replace_the_file_whole_and_leave_no_temporary_beside_it(tmp_path):
    path = tmp_path / "deep" / "report.json"
    write_atomic(path, "{\"é\": 1}")
    assert path.read_text(encoding="utf-8") == "{\"é\": 1}"
    write_atomic(path, b"\x00\xffbinary")
    assert path.read_bytes() == b"\x00\xffbinary"
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]


def test_a_write_that_fails_leaves_the_old_file_as_it_was(tmp_path):
    path = tmp_path / "result.json"
    write_atomic(path, "old")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "half \ud800")  # a lone surrogate: no UTF-8 for it
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["result.json"]
