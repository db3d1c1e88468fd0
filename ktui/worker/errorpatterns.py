"""The one line that says where an output is wrong, read from the exact index sets of its mismatches.

The rules run on the counts ``errormap.reduce`` made (``Mismatches``) (per row, column, slice and diagonal, all
exact: the grid is only for drawing) and name a pattern only where the sets are exactly that
pattern, tried in this order:

- ``few``: three elements or fewer, named one by one;
- ``every``: every element;
- ``product``: the mismatches are exactly every combination of their rows, columns and slices
  (whole columns of every row, whole rows, a block);
- ``cross``: exactly some whole rows and some whole columns (a tail missed in both dimensions);
- ``diagonal``: all on one diagonal;
- ``columns`` / ``rows``: all within a run or a regular repetition of columns (or rows), not all of
  it, said with the share they cover;
- ``blocks``: every column's index modulo one block size (a power of two) in one narrow span,
  in three blocks or more (a race in one warp's lanes: "within cols 32–63 of each block of 128");
- ``scattered``: none of these — "scattered (no pattern)".

A set of indices along one dimension is named as all of it, one run (with "the last 3 columns",
"the second half" where it is one), a regular repetition that runs to the dimension's end ("every
4th block of 128 columns"), up to three runs, or, past that, "with no pattern among them".
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ktui.protocol.errormap import kinds_text

FEW = 3  # mismatching elements named one by one, at most
FEW_RUNS = 3  # runs of a set listed one by one, at most
MIN_REPEATS = 3  # repetitions a set needs to be called regular


@dataclass
class Mismatches:
    """The exact index sets of one output's mismatches, as counts on its device."""

    shape: tuple[int, ...]
    slices: int
    rows: int
    cols: int
    count: int
    kinds: dict[str, int]
    per_row: torch.Tensor  # [rows]
    per_col: torch.Tensor  # [cols]
    per_slice: torch.Tensor | None  # [slices]; None past errormap.MOST_SLICES
    per_offset: torch.Tensor | None  # [rows + cols - 1]: col - row + rows - 1; None for one row or one column
    cells: torch.Tensor  # [kinds 1..4, grid rows, grid cols]
    first: list[int]  # the first mismatching flat positions (at most errormap.FIRST_KEPT)

    @property
    def leading(self) -> tuple[int, ...]:
        return self.shape[:-2] if len(self.shape) >= 2 else ()


@dataclass(frozen=True)
class Noun:
    short: str  # "col"
    shorts: str  # "cols"
    long: str  # "column"
    longs: str  # "columns"


ROWS = Noun("row", "rows", "row", "rows")
COLS = Noun("col", "cols", "column", "columns")
ELEMENTS = Noun("element", "elements", "element", "elements")
SLICES = Noun("slice", "slices", "slice", "slices")


@dataclass(frozen=True)
class IndexSet:
    """The indices along one dimension where a mismatch is, in words."""

    size: int  # the dimension's length
    count: int  # members
    form: str  # "all", "run", "regular", "runs", "loose", "none"
    core: str  # "cols 112–114", "every 4th block of 128 columns (cols 0–127, 512–639, …)"
    note: str = ""  # "the last 3 columns", "the second half"

    @property
    def full(self) -> bool:
        return self.form == "all"

    @property
    def shaped(self) -> bool:
        """One run or a regular repetition: a shape worth naming even where it is not covered whole."""
        return self.form in ("run", "regular")

    def words(self, tail: str = "", only: bool = False) -> str:
        """``cols 112–114{tail} only (the last 3 columns)``."""
        return f"{self.core}{tail}{' only' if only else ''}{f' ({self.note})' if self.note else ''}"


def index_set(counts: torch.Tensor, noun: Noun, label=str) -> IndexSet:
    """The members of ``counts`` (those above 0) as an ``IndexSet``; ``label`` writes an index."""
    size = counts.numel()
    present = counts > 0
    count = int(present.sum())
    if count == 0:
        return IndexSet(size, 0, "none", f"no {noun.shorts}")
    if count == size:
        return IndexSet(size, count, "all", f"every {noun.long}")
    edges = torch.diff(present.to(torch.int8), prepend=present.new_zeros(1, dtype=torch.int8),
                       append=present.new_zeros(1, dtype=torch.int8))
    starts = torch.nonzero(edges == 1).flatten()
    ends = torch.nonzero(edges == -1).flatten()  # exclusive
    runs = starts.numel()
    if runs == 1:
        a, b = int(starts[0]), int(ends[0]) - 1
        return IndexSet(size, count, "run", _span(noun, a, b, label), _run_note(noun, a, b, size))
    regular = _regular(starts, ends, size)
    if regular is not None:
        return IndexSet(size, count, "regular", _regular_words(noun, *regular, size, label))
    if runs <= FEW_RUNS:
        pairs = list(zip(starts.tolist(), (ends - 1).tolist()))
        spans = [label(a) if a == b else f"{label(a)}–{label(b)}" for a, b in pairs]
        return IndexSet(size, count, "runs", f"{noun.shorts} {_listed(spans)}")
    first = torch.nonzero(present[: int(starts[min(FEW_RUNS, runs - 1)]) + 1]).flatten()[:FEW_RUNS].tolist()
    return IndexSet(size, count, "loose", f"{count} {noun.longs} with no pattern among them "
                                          f"({', '.join(label(i) for i in first)}, …)")


def _regular(starts: torch.Tensor, ends: torch.Tensor, size: int) -> tuple[int, int, int] | None:
    """``(offset, width, period)`` where the runs are one block of ``width`` repeated every
    ``period`` from ``offset`` to the dimension's end (the last one cut by it); else None."""
    runs = starts.numel()
    if runs < MIN_REPEATS:
        return None
    lengths = ends - starts
    width, period, offset = int(lengths[0]), int(starts[1] - starts[0]), int(starts[0])
    steps = torch.diff(starts)
    if not bool((steps == period).all()) or period <= width or offset >= period:
        return None
    if not bool((lengths[:-1] == width).all()):
        return None
    last_cut = int(lengths[-1]) != width
    if (last_cut and int(ends[-1]) != size) or int(lengths[-1]) > width:
        return None
    if int(starts[-1]) + period < size:  # a repetition missing before the end: not regular
        return None
    return offset, width, period


def _regular_words(noun: Noun, offset: int, width: int, period: int, size: int, label) -> str:
    examples = [(offset + k * period, min(size, offset + k * period + width) - 1) for k in range(2)]
    listed = ", ".join(label(a) if a == b else f"{label(a)}–{label(b)}" for a, b in examples)
    start = f", from {noun.short} {label(offset)}" if offset else ""
    if width == 1:
        return f"every {_ordinal(period)} {noun.long}{start} ({noun.shorts} {listed}, …)"
    if period % width == 0 and offset % width == 0:
        return f"every {_ordinal(period // width)} block of {width} {noun.longs}{start} ({noun.shorts} {listed}, …)"
    return f"{width} {noun.longs} in every {period}{start} ({noun.shorts} {listed}, …)"


def _span(noun: Noun, a: int, b: int, label) -> str:
    return f"{noun.short} {label(a)}" if a == b else f"{noun.shorts} {label(a)}–{label(b)}"


def _run_note(noun: Noun, a: int, b: int, size: int) -> str:
    """Where one run sits in its dimension, when that is worth words: the halves, the first or last few."""
    k = b - a + 1
    if size % 2 == 0 and k == size // 2:
        return "the first half" if a == 0 else "the second half" if b == size - 1 else ""
    if b == size - 1:
        return f"the last {noun.long}" if k == 1 else f"the last {k} {noun.longs}"
    if a == 0:
        return f"the first {noun.long}" if k == 1 else f"the first {k} {noun.longs}"
    return ""


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


# -- the rules ------------------------------------------------------------------------------------
def describe(found: Mismatches) -> tuple[str, str]:
    """``(the line, the rule that wrote it)`` for the mismatches ``found``."""
    total = found.slices * found.rows * found.cols
    what, joiner = _what(found.kinds)
    if found.count <= FEW and found.count < total:
        places = [_index(found.shape, flat) for flat in found.first]
        word = "element" if found.count == 1 else "elements"
        return f"only {found.count} {word} {_kind_words(found.kinds)}: {_listed(places)}", "few"
    if found.count == total:
        return f"{what}{joiner}every element", "every"
    vector = len(found.shape) < 2
    rows = index_set(found.per_row, ROWS)
    cols = index_set(found.per_col, ELEMENTS if vector else COLS)
    slices = _slices(found)
    product = slices is not None and found.count == slices.count * rows.count * cols.count
    if product and not (vector and cols.form == "loose"):
        return f"{what}{joiner}{_product(rows, cols, slices, vector)}", "product"
    if slices is not None:
        cross = _cross(found)
        if cross:
            return f"{what}{joiner}{cross}", "cross"
    diagonal = _diagonal(found)
    if diagonal:
        return f"{what}{' on ' if joiner == ' in ' else joiner}{diagonal}", "diagonal"
    in_rows = "" if vector else ", in every row" if rows.full else f", in {rows.count} of {rows.size} rows"
    there = f"{found.count} of the {rows.count * cols.count * found.slices} elements there"
    if cols.shaped and not vector:
        return f"{what}{joiner}{cols.words()}{in_rows}: {there}", "columns"
    if rows.shaped:
        region = rows.count * found.cols * found.slices
        return f"{what}{joiner}{rows.words()}: {found.count} of their {region} elements", "rows"
    within = _within_blocks(found.per_col, ELEMENTS if vector else COLS)
    if within:
        return f"{what}{' ' if joiner == ' in ' else joiner}{within}{in_rows}: {there}", "blocks"
    noun = "mismatches" if what.startswith("all") else what.lower() if what.startswith("never") else what
    where = f"{cols.count} of {cols.size} elements" if vector else \
        f"{rows.count} of {rows.size} rows and {cols.count} of {cols.size} columns"
    return f"scattered (no pattern): {found.count} {noun} in {where}", "scattered"


# The block sizes a kernel tiles an axis by, tried for "within cols 32–63 of each block of 128".
BLOCKS = tuple(2 ** k for k in range(4, 17))
MOST_OF_A_BLOCK = 0.5  # a span wider than this share of its block says little: not named


def _within_blocks(counts: torch.Tensor, noun: Noun) -> str:
    """Where every mismatch's index, modulo one block size, falls in one narrow span, touching
    ``MIN_REPEATS`` blocks or more: the narrowest such span in words ("within cols 32–63 of each
    block of 128 columns"); else "". A claim of containment, exact: no index outside the span."""
    present = counts > 0
    size = counts.numel()
    if int(present.sum()) > MOST_OF_A_BLOCK * size:  # more than any span of half of each block holds
        return ""
    best: tuple[float, int, int, int, int] | None = None
    for block in BLOCKS:
        blocks = -(-size // block)
        if blocks < MIN_REPEATS:
            break
        tiled = torch.nn.functional.pad(present, (0, blocks * block - size)).view(blocks, block)
        touched = int(tiled.any(dim=1).sum())
        if touched < MIN_REPEATS:
            continue
        residues = tiled.any(dim=0).to(torch.int8)
        edges = torch.diff(residues, prepend=residues.new_zeros(1), append=residues.new_zeros(1))
        starts, ends = torch.nonzero(edges == 1).flatten(), torch.nonzero(edges == -1).flatten()
        if starts.numel() != 1:
            continue
        a, b = int(starts[0]), int(ends[0]) - 1
        share = (b - a + 1) / block
        if share <= MOST_OF_A_BLOCK and (best is None or share < best[0]):
            best = (share, block, a, b, touched)
    if best is None:
        return ""
    _, block, a, b, touched = best
    blocks = -(-size // block)
    span = f"{noun.short} {a}" if a == b else f"{noun.shorts} {a}–{b}"
    which = f"all {blocks}" if touched == blocks else f"{touched} of its {blocks}"
    return f"within {span} of each block of {block} {noun.longs} (in {which} blocks)"


def _what(kinds: dict[str, int]) -> tuple[str, str]:
    """The subject of the line and how it joins the place: ``("NaN", " in ")``, ``("never written", ": ")``."""
    present = [k for k, n in kinds.items() if n]
    if present == ["wrong"]:
        return "all mismatches", " in "
    if present == ["unwritten"]:
        return "never written", ": "
    if set(present) <= {"nan", "inf"}:
        return " and ".join({"nan": "NaN", "inf": "Inf"}[k] for k in present), " in "
    return f"all mismatches ({kinds_text(kinds)})", " in "


def _kind_words(kinds: dict[str, int]) -> str:
    present = [k for k, n in kinds.items() if n]
    if present == ["wrong"]:
        return "beyond tolerance"
    if present == ["unwritten"]:
        return "never written"
    if set(present) <= {"nan", "inf"}:
        return " or ".join({"nan": "NaN", "inf": "Inf"}[k] for k in present)
    return f"wrong ({kinds_text(kinds)})"


def _index(shape: tuple[int, ...], flat: int) -> str:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def _slices(found: Mismatches) -> IndexSet | None:
    """The leading slices with a mismatch; None where they were too many to count one by one."""
    if found.per_slice is None:
        return None
    leading = found.leading

    def label(i: int) -> str:
        return _index(leading, i) if len(leading) > 1 else str(i)

    return index_set(found.per_slice, SLICES, label)


def _slice_tail(slices: IndexSet) -> str:
    if slices.size <= 1:
        return ""
    if slices.full:
        return f", in every one of the {slices.size} slices"
    return f", in {slices.words(f' of the {slices.size}', only=True)}"


def _product(rows: IndexSet, cols: IndexSet, slices: IndexSet, vector: bool) -> str:
    """The place of mismatches that are exactly every combination of their rows, columns and slices."""
    tail = _slice_tail(slices)
    if vector:  # one dimension, one slice: never all of it (that is every element)
        return cols.words(only=True)
    if rows.full and cols.full:
        return slices.words(f" of the {slices.size}", only=True)
    if rows.full:
        return cols.words(" of every row") + tail
    if cols.full:
        if rows.form == "loose":
            return f"whole rows: {rows.core}" + tail
        return rows.words(only=True) + tail
    if cols.form == "loose" and rows.count == 1:
        return f"{rows.core}: {cols.core}" + tail
    notes = "; ".join(n for n in (rows.note, cols.note) if n)
    return f"{rows.core} × {cols.core} only" + (f" ({notes})" if notes else "") + tail


def _cross(found: Mismatches) -> str:
    """Exactly some whole rows and some whole columns of every slice (an L or a cross), in words; else ""."""
    full_rows = found.per_row == found.slices * found.cols
    full_cols = found.per_col == found.slices * found.rows
    n_rows, n_cols = int(full_rows.sum()), int(full_cols.sum())
    if not n_rows or not n_cols or n_rows == found.rows or n_cols == found.cols:
        return ""
    union = (n_rows * found.cols + n_cols * found.rows - n_rows * n_cols) * found.slices
    if union != found.count:
        return ""
    cols = index_set(full_cols.to(torch.int64), COLS)
    rows = index_set(full_rows.to(torch.int64), ROWS)
    return f"{cols.words(' of every row')} and {rows.words(' of every column')}"


def _diagonal(found: Mismatches) -> str:
    """All on one diagonal (``col - row`` the same), or on two or three with several mismatches
    each, in words; else ""."""
    if found.per_offset is None:
        return ""
    lines = torch.nonzero(found.per_offset).flatten()
    if not 1 <= lines.numel() <= FEW_RUNS:
        return ""
    counts = found.per_offset[lines].tolist()
    if lines.numel() > 1 and min(counts) < MIN_ON_A_DIAGONAL:
        return ""
    offsets = [int(i) - (found.rows - 1) for i in lines.tolist()]
    which = [_diagonal_name(d) for d in offsets]
    if len(offsets) > 1:
        return f"the diagonals {_listed(which)} only"
    length = _diagonal_length(found.rows, found.cols, offsets[0]) * found.slices
    cover = "" if found.count == length else f", {found.count} of its {length} elements"
    return f"the diagonal ({which[0]}) only{cover}"


MIN_ON_A_DIAGONAL = 4  # mismatches each of two or three diagonals must hold to be named


def _diagonal_name(offset: int) -> str:
    return "col = row" if offset == 0 else f"col = row {'+' if offset > 0 else '-'} {abs(offset)}"


def _diagonal_length(rows: int, cols: int, offset: int) -> int:
    return min(rows, cols - offset) if offset >= 0 else min(cols, rows + offset)
