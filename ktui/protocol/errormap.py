"""Where a wrong output is wrong: the error map's JSON form, its grid and its text drawing.

The worker (``ktui.worker.errormap``) reduces an output's mismatches (values beyond tolerance,
NaN or Inf, elements never written) over its last two dimensions, the leading ones folded (a cell
counts over them), to a grid of at most ``MAX_ROWS`` × ``MAX_COLS`` cells and one line naming the
pattern, found on the exact index sets (the grid is for drawing). It travels in a rung's figures as
``error_map`` (``ErrorMap.to_json``, at most ``MAX_JSON_BYTES``); every surface reads it back
through this module: the CLI and MCP the description, the dashboard and ``dump`` the grid.

A grid row is a string, one character per cell: ``.`` no mismatch; otherwise the cell's most
severe kind (never written, then NaN or Inf, then a value beyond tolerance) and its density, the
share of the cell's elements that mismatch in ninths rounded up: ``1``–``9`` values beyond
tolerance, ``a``–``i`` NaN or Inf, ``A``–``I`` never written.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_ROWS, MAX_COLS = 32, 64
MAX_CELLS = 1536  # 24 × 64: the grid's characters leave room for the rest within MAX_JSON_BYTES
MAX_JSON_BYTES = 2048
MAX_DESCRIPTION = 240  # characters of the one-line description

WRONG, NONFINITE, UNWRITTEN = "wrong", "nonfinite", "unwritten"
# Per kind, most severe last: the character a cell's level is written with (level 1 → the first).
LEVEL_CHARS = {WRONG: "123456789", NONFINITE: "abcdefghi", UNWRITTEN: "ABCDEFGHI"}
SEVERITY = (WRONG, NONFINITE, UNWRITTEN)
LEVELS = 9
CLEAN = "."


@dataclass
class ErrorMap:
    """Where a wrong output is wrong: a rung's `figures.error_map`. Its mismatches (values beyond
    tolerance, NaN or Inf, elements never written) counted over the output's last two dimensions,
    the leading ones folded (a cell counts over them), on a grid of at most 32 rows and 64 columns
    of cells, 1,536 in all, and the line that names their pattern, read from the exact positions. At
    most 2 KB of JSON."""

    description: str  # one line: where the mismatches are, the pattern named when there is one
    pattern: str  # the rule that named it: every, product, cross, diagonal, columns, rows, few, scattered
    shape: list[int]  # the output's shape
    rows: int  # the map's rows: the output's second-to-last dimension (1 for a 1-D output)
    cols: int  # the map's columns: the output's last dimension
    slices: int  # the leading dimensions folded into each cell (their product; 1 when none)
    cell_rows: int  # rows per grid cell (the last cell may hold fewer)
    cell_cols: int  # columns per grid cell (the last cell may hold fewer)
    grid: list[str]  # one string per cell row, a character per cell: `.` none, else its worst kind and its share of mismatching elements in ninths, `1`–`9` beyond tolerance, `a`–`i` NaN or Inf, `A`–`I` never written
    mismatched: int  # elements that mismatch, of all the output's
    kinds: dict[str, int] = field(default_factory=dict)  # per kind (wrong, nan, inf, unwritten), elements that mismatch
    output: int = 0  # which output of the kernel (its position), for kernels that return several

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ErrorMap | None:
        """The map a rung's figures hold, or None where they hold none (or something else)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except TypeError:
            return None

    def row_span(self, i: int) -> tuple[int, int]:
        """The first and last output row of grid row ``i``."""
        return i * self.cell_rows, min(self.rows, (i + 1) * self.cell_rows) - 1

    def col_span(self, j: int) -> tuple[int, int]:
        return j * self.cell_cols, min(self.cols, (j + 1) * self.cell_cols) - 1


def grid_dims(rows: int, cols: int) -> tuple[int, int, int, int]:
    """``(grid rows, grid cols, rows per cell, cols per cell)`` for a map of ``rows`` × ``cols``:
    cells of whole rows and columns, every cell but the last of a line the same size, at most
    ``MAX_COLS`` across, ``MAX_ROWS`` down and ``MAX_CELLS`` in all."""
    cell_cols = max(1, math.ceil(cols / MAX_COLS))
    grid_cols = max(1, math.ceil(cols / cell_cols))
    most_rows = max(1, min(MAX_ROWS, MAX_CELLS // grid_cols))
    cell_rows = max(1, math.ceil(rows / most_rows))
    grid_rows = max(1, math.ceil(rows / cell_rows))
    return grid_rows, grid_cols, cell_rows, cell_cols


def level_of(mismatched: int, elements: int) -> int:
    """A cell's level: the share of its ``elements`` that mismatch, in ninths rounded up (0: none)."""
    if mismatched <= 0:
        return 0
    return min(LEVELS, -(-LEVELS * mismatched // elements))


def cell_char(kind: str | None, level: int) -> str:
    """The character of a cell whose most severe kind is ``kind`` at ``level`` (``level_of``)."""
    return LEVEL_CHARS[kind][level - 1] if kind and level > 0 else CLEAN


def read_cell(char: str) -> tuple[str | None, int]:
    """``(kind, level)`` of a grid character; ``(None, 0)`` for a clean cell."""
    for kind, chars in LEVEL_CHARS.items():
        if char in chars:
            return kind, chars.index(char) + 1
    return None, 0


@dataclass(frozen=True)
class Drawing:
    """A map's grid folded to fit a drawing area, and the first output row and column of each
    drawn line and character (the axes' labels)."""

    lines: list[str]
    row_starts: list[int]
    col_starts: list[int]
    rows: int  # the output's rows and columns, for the last labels
    cols: int


def drawing(m: ErrorMap, height: int, width: int) -> Drawing:
    """``m``'s grid drawn at most ``height`` × ``width`` characters: neighbouring cells merged, each
    merged cell the most severe kind among them at their highest level (one bad cell stays visible)."""
    grid = m.grid or [CLEAN]
    tall, wide = len(grid), len(grid[0])
    step_r, step_c = max(1, math.ceil(tall / max(1, height))), max(1, math.ceil(wide / max(1, width)))
    lines = []
    for top in range(0, tall, step_r):
        line = []
        for left in range(0, wide, step_c):
            cells = [read_cell(grid[r][c]) for r in range(top, min(top + step_r, tall))
                     for c in range(left, min(left + step_c, wide))]
            kind, level = max(cells, key=lambda kl: (SEVERITY.index(kl[0]) + 1 if kl[0] else 0, kl[1]))
            line.append(LEVEL_CHARS[kind][level - 1] if kind else CLEAN)
        lines.append("".join(line))
    return Drawing(lines, [top * m.cell_rows for top in range(0, tall, step_r)],
                   [left * m.cell_cols for left in range(0, wide, step_c)], m.rows, m.cols)


def kinds_text(kinds: dict[str, int]) -> str:
    """``1500 beyond tolerance, 250 NaN`` from an error map's ``kinds``."""
    words = {"wrong": "beyond tolerance", "nan": "NaN", "inf": "Inf", "unwritten": "never written"}
    return ", ".join(f"{kinds[k]} {words[k]}" for k in words if kinds.get(k))


SHADES = " ░▒▓█"  # a drawn cell's density, by level: 1-2 ░, 3-4 ▒, 5-7 ▓, 8-9 █


def shade(level: int) -> str:
    if level <= 0:
        return "·"
    return SHADES[1] if level <= 2 else SHADES[2] if level <= 4 else SHADES[3] if level <= 7 else SHADES[4]


def text_lines(m: ErrorMap, height: int = MAX_ROWS, width: int = MAX_COLS) -> list[str]:
    """The map as plain text with labelled axes, for ``dump`` and for readers without colour:
    one character per drawn cell, its density shaded (``·`` none, ``░▒▓█`` more), the kinds in words."""
    drawn = drawing(m, height, width)
    labels = row_labels(drawn)
    label_w = max(len(t) for t in labels)
    lines = [m.description]
    lines += [f"{label:>{label_w}} │{''.join(shade(read_cell(ch)[1]) for ch in line)}"
              for label, line in zip(labels, drawn.lines)]
    across = len(drawn.lines[0])
    lines.append(" " * label_w + " └" + "─" * across)
    lines.append(" " * (label_w + 2) + col_axis(drawn))
    lines.append(legend(m))
    return lines


def legend(m: ErrorMap) -> str:
    """What the drawing's axes and shades mean, and the kinds it counts."""
    fold = f" (the {m.slices} slices of the leading dimensions folded)" if m.slices > 1 else ""
    axes = f"rows down, cols across{fold}" if m.rows > 1 else f"elements across{fold}"
    return f"{axes} · ░▒▓█ share of a cell that mismatches · {kinds_text(m.kinds)}"


def row_labels(drawn: Drawing) -> list[str]:
    """The first output row of the first line, of the middle one and (past eight lines) of every
    fourth, and the last row on the last line; the others blank (a label per line would be a
    column of numbers)."""
    last = len(drawn.lines) - 1
    every = 4 if last >= 8 else max(1, last)
    labels = [str(start) if i % every == 0 or i == last // 2 else "" for i, start in enumerate(drawn.row_starts)]
    labels[last] = str(drawn.rows - 1)
    return labels


def col_axis(drawn: Drawing) -> str:
    """The column labels under a drawing: 0 at its left, the last column at its right, the first
    column of the middle character between, each where it fits without touching another."""
    width = len(drawn.col_starts)
    axis = [" "] * width
    placed: list[tuple[int, int]] = []
    for j, text in ((0, "0"), (width - 1, str(drawn.cols - 1)), (width // 2, str(drawn.col_starts[width // 2]))):
        start = min(j, width - len(text))
        if start < 0 or any(start <= b + 1 and a <= start + len(text) for a, b in placed):
            continue
        axis[start: start + len(text)] = list(text)
        placed.append((start, start + len(text) - 1))
    return "".join(axis).rstrip()
