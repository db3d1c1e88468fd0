"""Turning exceptions into ``ErrorInfo`` that points at the user's file and line.

A developer wants "softmax_triton.py:42: unsupported operand", not forty lines of MLIR or of
ktui's own frames. Syntax errors carry their own location; Triton compilation errors carry an AST
node relative to the kernel's source, which we shift to file lines; anything else is located at
the deepest traceback frame that lies in one of the user's files.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Iterable

from ktui.loop.dsl import cutedsl
from ktui.protocol.events import ErrorInfo, SourceLocation
from ktui.protocol.sourcelines import location, syntax_error_info

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


def error_info(exc: BaseException, user_files: Iterable[str] = (), jit_functions: Iterable = ()) -> ErrorInfo:
    """Describe ``exc`` for the user: type, one-paragraph message, traceback, user location.

    ``jit_functions`` are the module's Triton ``JITFunction`` objects, used to place a
    compilation error (whose AST node is relative to one kernel's source) in the file.
    """
    user = {str(Path(f).resolve()) for f in user_files}
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return syntax_error_info(exc, tb)
    if (cute := _cute_compile_error(exc, user)) is not None:
        loc = location(cute["file"], cute["line"], cute.get("col"))
        message = _ANSI.sub("", cute["message"])
    else:
        message = _short_message(exc)
        loc = _triton_location(exc, list(jit_functions)) or _deepest_user_frame(exc, user)
    return ErrorInfo(type=type(exc).__name__, message=message, traceback=tb, location=loc)


def _cute_compile_error(exc: BaseException, user: set[str]) -> dict | None:
    """A CuTeDSL compile error placed in the user's file (its errors carry MLIR locations)."""

    if not cutedsl.is_compile_error(exc):
        return None
    for file in sorted(user):
        found = cutedsl.locate_compile_error(exc, file)
        if found:
            return found
    return None


def _short_message(exc: BaseException) -> str:
    """The error text, minus the long IR dumps compilers like to attach."""
    from_triton = _triton_compilation_error(exc)
    if from_triton is not None:
        inner = from_triton.error_message or ""
        if not inner and from_triton.__cause__ is not None:
            inner = f"{type(from_triton.__cause__).__name__}: {from_triton.__cause__}"
        text = inner or str(from_triton)
    else:
        text = str(exc) or type(exc).__name__
    lines = _ANSI.sub("", text).strip().splitlines()
    if len(lines) > 12:
        lines = lines[:12] + [f"… ({len(lines) - 12} more lines in the traceback)"]
    return "\n".join(lines)


def _triton_compilation_errors(exc: BaseException) -> list:
    """Triton ``CompilationError``s in the exception chain, innermost first (no triton import)."""
    found = []
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__module__.startswith("triton") and hasattr(current, "node") and hasattr(current, "src"):
            found.append(current)
        current = current.__cause__ or current.__context__
    return found[::-1]


def _triton_compilation_error(exc: BaseException):
    errors = _triton_compilation_errors(exc)
    return errors[0] if errors else None


def _triton_location(exc: BaseException, jit_functions: list) -> SourceLocation | None:
    for err in _triton_compilation_errors(exc):
        if not hasattr(err.node, "lineno"):
            continue
        for jit in jit_functions:
            if getattr(jit, "src", None) == err.src:
                def_line, indent = _def_position(jit)
                # The node is relative to the kernel's dedented source, starting at its ``def`` line.
                return location(jit.fn.__code__.co_filename, def_line + err.node.lineno - 1, err.node.col_offset + indent + 1)
    return None


def _def_position(jit) -> tuple[int, int]:
    """File line of a jit function's ``def`` and its indent (Triton 3.6 has no attribute for it)."""
    for offset, text in enumerate(jit.raw_src):
        stripped = text.lstrip()
        if stripped.startswith("def "):
            return jit.starting_line_number + offset, len(text) - len(stripped)
    return jit.starting_line_number, 0


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
