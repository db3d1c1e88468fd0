"""Turning exceptions into ``ErrorInfo`` that points at the user's file and line.

A developer wants "softmax_triton.py:42: unsupported operand", not forty lines of MLIR or of
ktui's own frames. Syntax errors carry their own location; a DSL's compile error is placed by its
adapter (``dsl/base.py``: ``Dsl.place``); anything else is located at the deepest traceback frame
that lies in one of the user's files.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from types import ModuleType
from typing import Iterable

from ktui.protocol.events import ErrorInfo, SourceLocation
from ktui.protocol.sourcelines import location, syntax_error_info
from ktui.worker.dsl.registry import DSLS

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RungFailure(Exception):
    """An expected failure of a rung (wrong shape, mismatch…) with its figures."""

    def __init__(self, message: str, figures: dict | None = None, status: str = "failed",
                 error: ErrorInfo | None = None):
        super().__init__(message)
        self.message = message
        self.figures = figures or {}
        self.status = status
        self.error = error  # the user's exception behind it, when there is one (its traceback, its line)


class RungSkipped(Exception):
    """The rung cannot run in this tier or after an earlier failure; the message says why."""


def error_info(exc: BaseException, user_files: Iterable[str] = (), modules: Iterable[ModuleType] = ()) -> ErrorInfo:
    """Describe ``exc`` for the user: type, one-paragraph message, traceback, user location.

    ``modules`` are the kernel's modules, where a DSL finds the kernel a compile error is about
    (Triton's error carries an AST node relative to one kernel's source)."""
    user = {str(Path(f).resolve()) for f in user_files}
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return syntax_error_info(exc, tb)
    modules = [m for m in modules if m is not None]
    placed = next((p for dsl in DSLS if (p := dsl.place(exc, user, modules)) is not None), None)
    text = placed.message if placed is not None else (str(exc) or type(exc).__name__)
    loc = placed.location if placed is not None else None
    return ErrorInfo(type=type(exc).__name__, message=_short(text), traceback=tb,
                     location=loc or _deepest_user_frame(exc, user))


def _short(text: str) -> str:
    """The error text, minus the long IR dumps compilers like to attach."""
    lines = _ANSI.sub("", text).strip().splitlines()
    if len(lines) > 12:
        lines = lines[:12] + [f"… ({len(lines) - 12} more lines in the traceback)"]
    return "\n".join(lines)


def _deepest_user_frame(exc: BaseException, user: set[str]) -> SourceLocation | None:
    tb = exc.__traceback__
    best = None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        try:
            resolved = str(Path(filename).resolve())
        except OSError:
            resolved = filename
        if resolved in user:
            best = (filename, tb.tb_lineno)
        tb = tb.tb_next
    if best is None:
        cause = exc.__cause__ or exc.__context__
        if cause is not None and cause is not exc:
            return _deepest_user_frame(cause, user)
        return None
    return location(*best)
