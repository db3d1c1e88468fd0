"""``visible``: the one way ktui shows text from outside on a terminal."""

import pytest

from ktui.protocol.visible import visible

pytestmark = pytest.mark.unit


def test_control_characters_but_newline_and_tab_are_written_out_and_the_rest_is_kept():
    text = "a\x1b]52;c;UFdORUQ=\x07b\x00\x7f\x9b2J\r\nc\td é→"
    assert visible(text) == "a\\x1b]52;c;UFdORUQ=\\x07b\\x00\\x7f\\x9b2J\\x0d\nc\td é→"


def test_visible_text_stays_the_same_when_made_visible_again():
    once = visible("\x1b[2J\x85")
    assert visible(once) == once
