"""A place in the user's source, shown as the lines around it: what every error that points at
the user's file carries. Standard library only, so the parent can place a syntax error (found by
compiling the text, no user code run) exactly as the worker places any other error.
"""

from __future__ import annotations

import ast
import io
import linecache
import threading
import tokenize
import traceback
from pathlib import Path

from ktui.protocol.events import ErrorInfo, SourceLocation

CONTEXT_LINES = 3


def excerpt(file: str, line: int, col: int | None = None, context: int = CONTEXT_LINES) -> tuple[str, int]:
    """Numbered source lines around ``line`` (and a caret under ``col``), plus the first line number."""
    lines = linecache.getlines(file)
    if not lines:
        try:
            lines = Path(file).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        except OSError:
            return "", line
    first = max(1, line - context)
    last = min(len(lines), line + context)
    width = len(str(last))
    out = []
    for n in range(first, last + 1):
        marker = ">" if n == line else " "
        out.append(f"{marker}{n:>{width}} | {lines[n - 1].rstrip()}")
        if n == line and col is not None and col > 0:
            out.append(" " * (width + 4) + " " * (col - 1) + "^")
    return "\n".join(out), first


def location(file: str, line: int, col: int | None = None) -> SourceLocation:
    text, first = excerpt(file, line, col)
    return SourceLocation(file=file, line=line, col=col, excerpt=text, first_line=first)


def syntax_error_info(exc: SyntaxError, tb: str = "") -> ErrorInfo:
    """A syntax error at the user's line: ``msg (file.py:line:col)`` and the lines around it."""
    loc = location(exc.filename, exc.lineno, exc.offset) if exc.filename and exc.lineno else None
    message = f"{exc.msg} ({Path(exc.filename or '?').name}:{exc.lineno}:{exc.offset or 0})"
    return ErrorInfo(type=type(exc).__name__, message=message,
                     traceback=tb or "".join(traceback.format_exception_only(type(exc), exc)), location=loc)


# Held while the parent parses Python text: CPython 3.11's parser is not safe in two threads at
# once ("AST constructor recursion depth mismatch"), and the run queue and the owner use threads.
PARSING = threading.RLock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` under ``PARSING``: every parse in the parent goes through here."""
    with PARSING:
        return ast.parse(source, filename)


def python_text(data: bytes, file: str) -> tuple[str, SyntaxError | None]:
    """The text Python reads from a file's bytes (UTF-8, or the encoding its coding line declares:
    PEP 263), and, when Python could not import the file because its bytes do not decode, the
    error at the first such byte (the text then holds U+FFFD there, for display only)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if "unknown encoding" in str(exc):  # a coding line naming no encoding Python knows
            exc.filename = exc.filename or file
            exc.lineno = exc.lineno or (1 if b"coding" in data.split(b"\n", 1)[0] else 2)
            return data.decode("utf-8", errors="replace"), exc
        encoding = "utf-8"  # its first lines do not decode: found below, at their byte
    try:
        return data.decode(encoding), None
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        end = data.find(b"\n", exc.start)
        line = data[start:end if end >= 0 else len(data)].decode(encoding, errors="replace")
        said = "UTF-8" if encoding in ("utf-8", "utf-8-sig") else encoding
        error = SyntaxError(f"not valid {said}: byte 0x{data[exc.start]:02x} ({exc.reason}); Python cannot import "
                            "this file: save it as UTF-8 or declare its encoding (# -*- coding: NAME -*-)",
                            (file, data.count(b"\n", 0, exc.start) + 1, exc.start - start + 1, line))
        return data.decode(encoding, errors="replace"), error


def syntax_error(source: str, file: str) -> SyntaxError | None:
    """The syntax error of this Python text, if any: compiled, never run."""
    try:
        with PARSING:
            compile(source, file, "exec", dont_inherit=True)
    except SyntaxError as exc:  # also its subclasses: IndentationError, TabError
        return exc
    return None
