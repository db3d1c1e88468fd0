"""The bounds on text from user code: its start kept, how much more there was said, and text
already cut left as it is (an event that crosses two processes reads the same)."""

from __future__ import annotations

import io

import pytest

from ktui.dispatch.worker_protocol import bounded_lines
from ktui.protocol.bounds import LINE_CHARS, MESSAGE_CHARS, MESSAGE_LINE_CHARS, QUOTE_CHARS, cut, cut_message
from ktui.protocol.events import ErrorInfo, Output, RunFinished, RungFinished, event_from_json
from ktui.protocol.processes import OUTPUT_END

pytestmark = pytest.mark.unit


def test_a_long_line_keeps_its_start_and_says_how_many_characters_followed():
    line = cut("x" * 1_000_000, LINE_CHARS)
    assert line == "x" * LINE_CHARS + f"… ({1_000_000 - LINE_CHARS:,} more characters not kept)"
    assert cut(line, LINE_CHARS) == line
    assert cut(line, QUOTE_CHARS) == "x" * QUOTE_CHARS + f"… ({1_000_000 - QUOTE_CHARS:,} more characters not kept)"
    assert cut("short", QUOTE_CHARS) == "short"


def test_a_long_message_keeps_its_first_lines_each_cut_and_a_traceback_its_last():
    message = cut_message("\n".join(["y" * 50_000] * 30))
    lines = message.splitlines()
    assert len(message) <= MESSAGE_CHARS + 64 and cut_message(message) == message
    assert lines[0] == "y" * MESSAGE_LINE_CHARS + f"… ({50_000 - MESSAGE_LINE_CHARS:,} more characters not kept)"
    assert lines[-1] == f"… ({30 - len(lines) + 1} more lines not kept)"
    frames = "\n".join(f"frame {n}" for n in range(100_000))
    kept = cut_message(frames, 20_000, keep_end=True)
    assert kept.splitlines()[-1] == "frame 99999" and kept.startswith("… (") and len(kept) <= 20_064


def test_every_event_bounds_what_it_carries_from_user_code_even_rebuilt_from_json():
    huge = "z" * 10_000_000
    rung = RungFinished("r", rung="compile", status="failed", message=huge,
                        error=ErrorInfo(type="ValueError", message=huge, traceback=f"Traceback\n{huge}"))
    finish = RunFinished("r", verdict="crashed", message=huge)
    printed = Output("r", text=huge)
    for event in (rung, finish, printed):
        again = event_from_json(event.to_json())
        assert again == event and len(event.dumps()) < 40_000
    assert len(rung.message) <= MESSAGE_CHARS + 64 and len(rung.error.traceback) <= 20_064
    assert printed.text.startswith("z" * LINE_CHARS) and printed.text.endswith("more characters not kept)")


def test_lines_read_from_a_pipe_are_cut_as_they_are_read_and_a_job_end_mark_after_one_stays():
    stream = io.StringIO("a\n" + "b" * 100_000 + "\n" + "c" * 100 + "\nd" * 3 + "e" * 50_000 + OUTPUT_END + "\n")
    lines = list(bounded_lines(stream, 1_000))
    assert lines == ["a\n", "b" * 1_000 + "… (99,000 more characters not kept)\n", "c" * 100 + "\n", "d\n", "d\n",
                     "d" + "e" * 999 + "… (49,001 more characters not kept)" + OUTPUT_END + "\n"]
    exact = list(bounded_lines(io.StringIO("f" * 1_000 + "\n" + "g"), 1_000))
    assert exact == ["f" * 1_000 + "\n", "g"]
