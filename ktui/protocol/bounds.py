"""How much of what user code prints or raises ktui keeps: the one place these bounds are set.

A kernel may print one 50 MB line, or raise an exception whose text is a whole tensor. ktui keeps
the start of such text and says how much more there was, so a message stays a message (in the
terminal, the history, the reports, the dashboard) and a long printed line is never dropped
whole. Text already cut is never cut again (a note fits in ``NOTE_ROOM``): an event that crosses
a process twice reads the same.
"""

from __future__ import annotations

import re

LINE_CHARS = 10_000  # a line of printed output: the output stream, output.txt, the output pane
MESSAGE_LINE_CHARS = 1_000  # a line of a rung's or a run's message, or of an error's traceback
MESSAGE_CHARS = 4_000  # a rung's or a run's message, an error's message: what one-line views quote from
TRACEBACK_CHARS = 20_000  # an error's traceback, its end kept (the innermost frames, the exception)
QUOTE_CHARS = 300  # a printed line quoted in ktui's own words (a crash's last output)
NOTE_ROOM = 64  # the longest note saying what was cut


_NOTE = re.compile(r"… \(([\d,]+) more characters not kept\)$")


def dropped_note(chars: int) -> str:
    return f"… ({chars:,} more characters not kept)"


def cut(text: str, chars: int) -> str:
    """``text``'s first ``chars`` characters and a note of how many more there were (counting
    those an earlier cut of it dropped: a quote of a cut line says how long the line was)."""
    if len(text) <= chars + NOTE_ROOM:
        return text
    earlier = _NOTE.search(text)
    dropped = int(earlier.group(1).replace(",", "")) if earlier else 0
    kept = text[: earlier.start()] if earlier else text
    return text[:chars] + dropped_note(len(kept) - chars + dropped)


def cut_message(text: str, chars: int = MESSAGE_CHARS, keep_end: bool = False) -> str:
    """``text`` with each line cut to ``MESSAGE_LINE_CHARS``, then whole lines kept up to ``chars``
    characters (the first ones, or the last with ``keep_end``) and a line saying how many were not."""
    if len(text) <= min(chars, MESSAGE_LINE_CHARS) + NOTE_ROOM:
        return text  # nearly every message: nothing to do
    lines = [cut(line, MESSAGE_LINE_CHARS) for line in text.split("\n")]
    if sum(len(line) + 1 for line in lines) <= chars + NOTE_ROOM:
        return "\n".join(lines)
    kept, used = [], 0
    for line in reversed(lines) if keep_end else lines:
        if used + len(line) + 1 > chars:
            break
        kept.append(line)
        used += len(line) + 1
    note = f"… ({len(lines) - len(kept):,} more lines not kept)"
    return "\n".join([note, *reversed(kept)] if keep_end else [*kept, note])
