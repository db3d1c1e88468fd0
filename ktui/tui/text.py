"""Words and glyphs the panes share: status labels, ages, paths relative to the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Group, RenderableType
from rich.text import Span, Text

from ktui.protocol.visible import CONTROL, visible

# Each status reads without colour too (NO_COLOR): a glyph and a word.
STATUS_LABELS: dict[str, tuple[str, str]] = {
    "new": ("·", "not run"),
    "queued": ("…", "queued"),
    "running": ("▶", "running"),
    "passed": ("✓", "passed"),
    "compiled": ("◇", "compiled"),  # compiled and dumped, not run (CuTeDSL on the CPU tier)
    "failed": ("✗", "failed"),
    "suspicious": ("?", "suspicious"),
    "crashed": ("✗", "crashed"),
    "timed_out": ("⏱", "timed out"),
    "cancelled": ("-", "cancelled"),
    "interrupted": ("-", "interrupted"),
    "error": ("!", "cannot run"),
    # rung statuses
    "ok": ("✓", "ok"),
    "skipped": ("-", "skipped"),
    "weak": ("!", "weak test"),  # the audit of the reference: a trivial kernel passes its test
}


def state_label(state: str, summary: dict) -> tuple[str, str]:
    """A kernel's state as glyph and word. A history recorded before the ``compiled`` verdict
    called a CuTeDSL kernel only compiled on the CPU tier ``passed`` with its correctness
    unchecked: it reads ``compiled`` too."""
    if state == "passed" and summary.get("unchecked"):
        state = "compiled"
    return STATUS_LABELS.get(state, ("?", state))


def ago(seconds: float | None) -> str:
    """``now``, ``12s``, ``5m``, ``3h``, ``2d``: the age of a result at a glance."""
    if seconds is None:
        return ""
    seconds = max(0.0, seconds)
    if seconds < 5:
        return "now"
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


def rel(path: str | Path, root: Path) -> str:
    """A path as the user typed it: relative to the workspace root when inside it."""
    if not path:
        return ""
    p = Path(path)
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return os.path.relpath(p) if p.is_absolute() else str(p)


def speedup_text(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def device_text(tier: str, device: str, arch: str, gpus: tuple[str, ...] = ()) -> str:
    """``NVIDIA H200 · sm_90a`` or ``CPU · Triton interpreter · sm_90a``; with one worker per
    GPU, ``NVIDIA H200 ×2 (GPUs 0,1) · sm_90a``."""
    if not tier:
        return "device: starting…"
    several = f" ×{len(gpus)} (GPUs {','.join(gpus)})" if gpus else ""
    if tier == "cpu":
        inner = device.split("(", 1)[1].rstrip(")") if "(" in device else "Triton interpreter"
        return f"CPU · {inner}{several} · {arch}"
    return f"{device}{several} · {arch}"


def shown(content: RenderableType) -> RenderableType:
    """What a pane draws, with the control characters of every text in it made visible
    (``visible``) and a plain string taken as text, never as markup: a file name or a kernel's
    output cannot set the window title, clear the screen or write the clipboard."""
    if isinstance(content, str):
        return Text(visible(content))
    if isinstance(content, Text):
        return _shown_text(content)
    if isinstance(content, Group):
        return Group(*(shown(part) for part in content.renderables))
    return content


def _shown_text(text: Text) -> Text:
    """``text`` made visible, its styles kept on the characters they covered."""
    plain = text.plain
    if not CONTROL.search(plain):
        return text
    at = [0]  # where each character of ``plain`` starts in the visible text, and its end
    for char in plain:
        at.append(at[-1] + (4 if CONTROL.fullmatch(char) else 1))
    out = text.copy()
    out.plain = visible(plain)
    out.spans = [Span(at[span.start], at[min(span.end, len(plain))], span.style) for span in text.spans]
    return out
