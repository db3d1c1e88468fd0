"""An error map drawn in the terminal: its line above, the grid as shaded blocks coloured by kind,
rows labelled on the left and columns under it, in whatever room the rungs pane has."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from ktui.protocol.errormap import (
    NONFINITE,
    SEVERITY,
    UNWRITTEN,
    WRONG,
    ErrorMap,
    col_axis,
    drawing,
    read_cell,
    row_labels,
    shade,
)

KIND_LABELS = {WRONG: "beyond tolerance", NONFINITE: "NaN/Inf", UNWRITTEN: "never written"}
SHADE_KEY = "░▒▓█ share of a cell"
MIN_GRID_LINES = 2


def heatmap(m: ErrorMap, width: int, height: int, styles: dict[str, Style]) -> Text:
    """``m`` in at most ``width`` columns and ``height`` lines (its line may wrap onto a second):
    the grid folded to fit (``protocol.errormap.drawing``), each cell ``·`` or a shade of its
    density in its kind's style (``styles``: one per kind, and ``axis``)."""
    description_lines = 1 if len(m.description) <= width else 2
    grid_lines = max(MIN_GRID_LINES, height - description_lines - 2)  # the axis and the key below it
    label_w = len(str(max(0, m.rows - 1)))
    drawn = drawing(m, grid_lines, max(8, width - label_w - 2))
    labels = row_labels(drawn)
    axis = styles.get("axis", Style())
    out = Text()
    out.append(m.description + "\n", style="bold")
    for label, line in zip(labels, drawn.lines):
        out.append(f"{label:>{label_w}} │", style=axis)
        for char in line:
            kind, level = read_cell(char)
            out.append(shade(level), style=styles.get(kind) if kind else axis)
        out.append("\n")
    across = len(drawn.lines[0])
    ticks = col_axis(drawn).ljust(across)
    out.append(" " * label_w + " └" + "".join("─" if ch == " " else ch for ch in ticks), style=axis)
    out.append("\n")
    out.append_text(key(m, styles, width))
    return out


def key(m: ErrorMap, styles: dict[str, Style], width: int) -> Text:
    """What the shades and colours say, the kinds present only; the leading dimensions folded, where
    they were and it fits."""
    text = Text(SHADE_KEY, style=styles.get("axis", Style()))
    present = [kind for kind in SEVERITY if any(read_cell(ch)[0] == kind for line in m.grid for ch in line)]
    for kind in present:
        text.append(" · ")
        text.append("█ ", style=styles.get(kind))
        text.append(KIND_LABELS[kind])
    folded = f" · {m.slices} slices folded"
    if m.slices > 1 and len(text.plain) + len(folded) <= width:
        text.append(folded, style=styles.get("axis", Style()))
    return text
