"""Text that came from outside ktui (a file name, what user code printed, a reference, a tool's
output) made safe to show on a terminal: its control characters are shown, never obeyed.

C0 controls other than newline and tab, DEL and C1 controls (so every escape sequence: a window
title, a cleared screen, OSC 52 writing the clipboard) are written as Python writes them in a
string, ``\\x1b``. JSON and MCP carry the text unchanged; only what people read goes through here.
"""

from __future__ import annotations

import re

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with each control character but newline and tab written out: ESC → ``\\x1b``."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
