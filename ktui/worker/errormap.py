"""An output's mismatches reduced, on its device, to what says where they are.

Run only on a comparison that failed (``judgement.judge``): a passing one costs nothing. The output
is walked in the chunks ``metrics.compare`` walks it in (``metrics.flat_chunks``), so the
workspace stays a chunk's whatever the output's size. Per chunk, each element gets a kind (never
written: ktui's poison still there; NaN; Inf; a finite value beyond tolerance), the mismatching
ones are found with one ``nonzero`` and their positions counted with ``bincount``: per row and per
column of the last two dimensions, per slice of the leading ones, per diagonal, per grid cell and
kind. Those counts are the exact index sets the patterns are read from (``errorpatterns``), and
the grid the map is drawn from (``ktui.protocol.errormap``).
"""

from __future__ import annotations

import json

import torch

from ktui.protocol.errormap import LEVELS, MAX_DESCRIPTION, MAX_JSON_BYTES, SEVERITY, ErrorMap, cell_char, grid_dims
from ktui.worker import errorpatterns
from ktui.worker.errorpatterns import Mismatches
from ktui.worker.metrics import chunk_elements, flat_chunks, noise_floor, thresholds_for
from ktui.worker.tier import POISON_BITS

# Element kinds, as the codes a chunk's elements are given (0: right).
KIND_CODES = {"wrong": 1, "nan": 2, "inf": 3, "unwritten": 4}
# Where a dtype is judged by PSNR and cosine similarity alone (fp16, bf16, fp8), an element is
# drawn as wrong beyond this many of the dtype's rounding steps of its reference value (or the
# noise floor near zero): correct kernels stay within one or two.
MAP_STEPS = 4
MOST_SLICES = 1 << 20  # leading slices counted one by one up to this many (the count vector's length)
FIRST_KEPT = errorpatterns.FEW  # the first mismatching positions kept: a handful of elements is named, not patterned


def map_limits(dtype: torch.dtype, limits: dict, peak: float) -> tuple[float, float]:
    """``(atol, rtol)`` an element is drawn against: the comparison's own where the dtype is judged
    element by element, else ``MAP_STEPS`` rounding steps and the noise floor."""
    atol, rtol = limits.get("atol"), limits.get("rtol")
    if atol is not None and rtol is not None:
        return float(atol), float(rtol)
    return noise_floor(dtype, limits, peak), MAP_STEPS * torch.finfo(dtype).eps


def locate(out: torch.Tensor, ref: torch.Tensor, tolerances: dict | None = None, *, peak: float | None = None,
           output: int = 0, chunk: int | None = None) -> ErrorMap | None:
    """The error map of ``out`` against ``ref`` (same shape and dtype); None when no element
    mismatches (a failure of PSNR or cosine similarity alone, spread below any element's limit)."""
    found = reduce(out, ref, tolerances, peak=peak, chunk=chunk)
    if found is None:
        return None
    description, pattern = errorpatterns.describe(found)
    _, _, cell_rows, cell_cols = grid_dims(found.rows, found.cols)
    cells = found.cells
    while True:
        made = ErrorMap(description=description[:MAX_DESCRIPTION], pattern=pattern, shape=list(found.shape),
                        rows=found.rows, cols=found.cols, slices=found.slices, cell_rows=cell_rows,
                        cell_cols=cell_cols, grid=grid_of(found, cells, cell_rows, cell_cols), mismatched=found.count,
                        kinds={k: n for k, n in found.kinds.items() if n}, output=output)
        if len(json.dumps(made.to_json())) <= MAX_JSON_BYTES or cells.shape[1] == 1:
            return made
        cells, cell_rows = _coarser(cells), cell_rows * 2  # a long description or shape: fewer rows of cells


def _coarser(cells: torch.Tensor) -> torch.Tensor:
    """The grid's counts with each pair of cell rows merged (cells twice as tall)."""
    kinds, rows, cols = cells.shape
    if rows % 2:
        cells = torch.cat([cells, cells.new_zeros(kinds, 1, cols)], dim=1)
    return cells.view(kinds, -1, 2, cols).sum(dim=2)


def reduce(out: torch.Tensor, ref: torch.Tensor, tolerances: dict | None = None, *, peak: float | None = None,
           chunk: int | None = None) -> Mismatches | None:
    """Count ``out``'s mismatches against ``ref`` by row, column, slice, diagonal and grid cell; None when there are none."""
    out, ref = out.detach(), ref.detach()
    shape = tuple(out.shape)
    if tuple(ref.shape) != shape:
        raise ValueError(f"error map: output shape {list(shape)} differs from the reference's {list(ref.shape)}")
    n = out.numel()
    if n == 0:
        return None
    rows, cols = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[0] if shape else 1)
    slices = n // (rows * cols)
    limits = thresholds_for(ref.dtype, tolerances)
    if peak is None:
        peak = _peak(ref, chunk)
    atol, rtol = map_limits(ref.dtype, limits, peak) if ref.dtype.is_floating_point else (0.0, 0.0)
    poison = POISON_BITS.get(out.dtype) if out.is_contiguous() else None
    acc = _Counts(shape, slices, rows, cols, out.device)
    for (offset, o), (_, r) in zip(flat_chunks(out, chunk or chunk_elements(n)), flat_chunks(ref, chunk or chunk_elements(n))):
        acc.add(offset, _codes(o, r, atol, rtol, poison))
    return acc.result()


def _codes(o: torch.Tensor, r: torch.Tensor, atol: float, rtol: float, poison: tuple | None) -> torch.Tensor:
    """Each element's kind code (0: right), as ``metrics.compare`` judges it: NaN where the
    reference is finite, or a NaN/Inf pattern the reference does not have, is never right. Where
    every value of both is finite (the common case) the tolerance test alone decides."""
    if not o.dtype.is_floating_point:
        return torch.ne(o, r).view(torch.uint8)
    # |o - r| > atol + rtol·|r| in float64, as compare judges it (two float64 temporaries; false for
    # a NaN, which the slow path below codes)
    diff = o.to(torch.float64, copy=True).sub_(r).abs_()
    code = torch.gt(diff, r.to(torch.float64, copy=True).abs_().mul_(rtol).add_(atol), out=diff.new_empty(
        diff.shape, dtype=torch.bool)).view(torch.uint8)
    del diff
    finite_ref = bool(torch.isfinite(r).all())
    if finite_ref and bool(torch.isfinite(o).all()):
        return code
    if finite_ref:  # every NaN or Inf of the output is a mismatch
        code.masked_fill_(torch.isinf(o), KIND_CODES["inf"])
        code.masked_fill_(torch.isnan(o), KIND_CODES["nan"])
    else:  # where the reference is not finite, the output must hold the same NaN or Inf
        same = (o == r) | (torch.isnan(o) & torch.isnan(r))
        code.masked_fill_(~torch.isfinite(r) & ~same & torch.isfinite(o), KIND_CODES["wrong"])
        code.masked_fill_(torch.isinf(o) & ~same, KIND_CODES["inf"])
        code.masked_fill_(torch.isnan(o) & ~same, KIND_CODES["nan"])
        del same
    if poison is not None:
        code.masked_fill_(o.view(poison[0]) == poison[1], KIND_CODES["unwritten"])
    return code


# A chunk with more than this share of mismatches is counted as whole rows (sums along its rows
# and columns), fewer by their positions (``nonzero``): either way the counts are the same.
DENSE = 1 / 16


class _Counts:
    """What ``reduce`` accumulates over the chunks: count vectors on the output's device."""

    def __init__(self, shape: tuple[int, ...], slices: int, rows: int, cols: int, device: torch.device):
        self.shape, self.slices, self.rows, self.cols = shape, slices, rows, cols
        self.grid_rows, self.grid_cols, self.cell_rows, self.cell_cols = grid_dims(rows, cols)
        zeros = lambda size: torch.zeros(size, dtype=torch.int64, device=device)  # noqa: E731
        self.per_row, self.per_col = zeros(rows), zeros(cols)
        self.per_slice = zeros(slices) if slices <= MOST_SLICES else None
        self.per_offset = zeros(rows + cols - 1) if rows > 1 and cols > 1 else None
        # more mismatches than three whole diagonals hold: no diagonal rule can name them
        self.on_diagonals = errorpatterns.FEW_RUNS * min(rows, cols) * slices
        self.cells = zeros(len(KIND_CODES) * self.grid_rows * self.grid_cols)
        self.first: list[int] = []
        self.count = 0

    def add(self, offset: int, code: torch.Tensor) -> None:
        kinds = torch.bincount(code, minlength=len(KIND_CODES) + 1).tolist()
        found = sum(kinds[1:])
        if not found:
            return
        self.count += found
        if self.count > self.on_diagonals:
            self.per_offset = None
        rows_whole = offset % self.cols == 0 and code.numel() % self.cols == 0
        # positions are needed while the mismatches may still be few enough to name one by one,
        # or may lie on a few diagonals
        named = self.count <= errorpatterns.FEW or self.per_offset is not None
        if rows_whole and found > DENSE * code.numel() and not named:
            self._add_rows(offset, code, kinds)
        else:
            self._add_positions(offset, code)

    def _add_positions(self, offset: int, code: torch.Tensor) -> None:
        """Few mismatches: each one's position, counted by row, column, slice, diagonal and cell."""
        where = torch.nonzero(code).flatten()
        kinds = code[where].to(torch.int64).sub_(1)
        if len(self.first) < FIRST_KEPT:
            self.first += [offset + int(i) for i in where[: FIRST_KEPT - len(self.first)].tolist()]
        flat = where.add_(offset)
        col = torch.remainder(flat, self.cols)
        flat = flat.div_(self.cols, rounding_mode="floor")
        row = torch.remainder(flat, self.rows)
        if self.per_slice is not None:
            self.per_slice += torch.bincount(flat.div_(self.rows, rounding_mode="floor"), minlength=self.slices)
        del flat
        self.per_row += torch.bincount(row, minlength=self.rows)
        self.per_col += torch.bincount(col, minlength=self.cols)
        if self.per_offset is not None:
            self.per_offset += torch.bincount(col - row + (self.rows - 1), minlength=self.rows + self.cols - 1)
        cell = kinds.mul_(self.grid_rows).add_(row.div_(self.cell_rows, rounding_mode="floor"))
        cell = cell.mul_(self.grid_cols).add_(col.div_(self.cell_cols, rounding_mode="floor"))
        self.cells += torch.bincount(cell, minlength=self.cells.numel())

    def _add_rows(self, offset: int, code: torch.Tensor, kinds: list[int]) -> None:
        """Many mismatches in a chunk of whole rows: sums along its rows and columns, no positions
        (a kind's cells summed per row, then added into the cells' rows)."""
        matrix = code.view(-1, self.cols)
        bad = matrix != 0
        self.per_col += bad.sum(dim=0)
        first = offset // self.cols
        ids = torch.arange(first, first + matrix.shape[0], device=code.device)
        per_row = bad.sum(dim=1)
        del bad
        row = torch.remainder(ids, self.rows)
        self.per_row.index_add_(0, row, per_row)
        if self.per_slice is not None:
            self.per_slice.index_add_(0, ids.div_(self.rows, rounding_mode="floor"), per_row)
        cell_row = row.div_(self.cell_rows, rounding_mode="floor")
        cells = self.cells.view(len(KIND_CODES), self.grid_rows, self.grid_cols)
        pad = self.grid_cols * self.cell_cols - self.cols
        for value, n in enumerate(kinds[1:], start=1):
            if not n:
                continue
            of_kind = (matrix == value).to(torch.int32)
            if pad:
                of_kind = torch.nn.functional.pad(of_kind, (0, pad))
            per_cell = of_kind.view(matrix.shape[0], self.grid_cols, self.cell_cols).sum(dim=2)
            cells[value - 1].index_add_(0, cell_row, per_cell)

    def result(self) -> Mismatches | None:
        if not self.count:
            return None
        cells = self.cells.view(len(KIND_CODES), self.grid_rows, self.grid_cols)
        per_kind = cells.sum(dim=(1, 2)).tolist()
        return Mismatches(self.shape, self.slices, self.rows, self.cols, self.count,
                          dict(zip(KIND_CODES, per_kind)), self.per_row, self.per_col, self.per_slice,
                          self.per_offset, cells, self.first)


# Each kind code's rank in the grid (the most severe drawn): wrong, NaN and Inf (one grid kind), never written.
GRID_RANK = (1, 2, 2, 3)


def grid_of(found: Mismatches, cells: torch.Tensor, cell_rows: int, cell_cols: int) -> list[str]:
    """The grid's strings: per cell its most severe kind and its level (``protocol.errormap.level_of``,
    computed here for every cell at once)."""
    grid_rows, grid_cols = cells.shape[1:]
    device = cells.device
    rank = torch.tensor(GRID_RANK, device=device).view(-1, 1, 1)
    severest = ((cells > 0) * rank).amax(dim=0)
    # each cell's element count: the last row and column of cells may be narrower
    heights = (found.rows - torch.arange(grid_rows, device=device) * cell_rows).clamp(max=cell_rows)
    widths = (found.cols - torch.arange(grid_cols, device=device) * cell_cols).clamp(max=cell_cols)
    elements = heights.view(-1, 1) * widths.view(1, -1) * found.slices
    total = cells.sum(dim=0)
    levels = torch.div(total * LEVELS + elements - 1, elements, rounding_mode="floor").clamp_(max=LEVELS)
    kinds = (None, *SEVERITY)
    return ["".join(cell_char(kinds[rank], level) for rank, level in zip(ranks, row_levels))
            for ranks, row_levels in zip(severest.tolist(), levels.tolist())]


def _peak(ref: torch.Tensor, chunk: int | None) -> float:
    """The reference's largest finite magnitude (the noise floor's scale where the comparison did not pass it)."""
    peak = 0.0
    for _, piece in flat_chunks(ref, chunk):
        if piece.dtype.is_floating_point:
            finite = torch.where(torch.isfinite(piece), piece.abs(), 0)
            peak = max(peak, float(finite.max()) if finite.numel() else 0.0)
    return peak

