"""Error metrics between a candidate's output and the reference's, and the pass/fail rule.

All metrics are computed in float64 on the tensors' device, one chunk at a time (see
``compare``). Thresholds depend on the output dtype: float32/float64 are judged element by
element (``|out - ref| <= atol + rtol·|ref|``), while low-precision outputs (fp16, bf16, fp8)
are judged mainly by PSNR and cosine similarity, since a few elements one rounding step apart
are normal there but a wrong algorithm shows up as a drop in signal-to-noise. A NaN or Inf
where the reference is finite never passes. A shape whose every value, output and reference, is
below the noise floor (``noise_floor``) carries no signal for PSNR or cosine similarity to judge:
those gates step aside, the elementwise check alone decides, and the comparison says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import torch

# Default thresholds by dtype name. A reference overrides any of them with
# TOLERANCES = {"bfloat16": {"psnr": 30.0}, ...}. Keys: atol, rtol (elementwise; None = not
# judged elementwise), psnr (dB, minimum), cossim (minimum).
DEFAULT_TOLERANCES: dict[str, dict[str, float | None]] = {
    "float64": {"atol": 1e-9, "rtol": 1e-7, "psnr": None, "cossim": 0.999999},
    "float32": {"atol": 1e-5, "rtol": 1e-4, "psnr": None, "cossim": 0.99999},
    # Rounding 10^5 Gaussian samples to these types alone gives about 87 dB (fp16), 69 dB
    # (bf16), 45 dB (e4m3) and 39 dB (e5m2): the floors leave room for accumulation-order
    # differences but not for a systematic error (a 5% scale error is about 38 dB).
    "float16": {"atol": None, "rtol": None, "psnr": 60.0, "cossim": 0.99999},
    "bfloat16": {"atol": None, "rtol": None, "psnr": 45.0, "cossim": 0.9999},
    "float8_e4m3fn": {"atol": None, "rtol": None, "psnr": 30.0, "cossim": 0.999},
    "float8_e5m2": {"atol": None, "rtol": None, "psnr": 25.0, "cossim": 0.995},
}
EXACT = {"atol": 0.0, "rtol": 0.0, "psnr": None, "cossim": None}

# Below the noise floor: a dtype without an atol (fp16, bf16, fp8) has no "close to zero" of its
# own, so its floor is the larger of float32's default atol (its kernels compute in float32, and a
# float32 result that small is noise by float32's own rule) and this many of the dtype's rounding
# steps at the reference's magnitude (values the dtype barely resolves: fp8's subnormals).
NOISE_STEPS = 2
NO_SIGNAL = "every value of this shape is below the noise floor: a zero kernel would pass it"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def thresholds_for(dtype: torch.dtype, overrides: dict | None = None) -> dict[str, float | None]:
    name = dtype_name(dtype)
    if dtype.is_floating_point:
        base = dict(DEFAULT_TOLERANCES.get(name, DEFAULT_TOLERANCES["bfloat16"]))
    else:
        base = dict(EXACT)
    if overrides:
        for key, value in overrides.items():
            key_name = dtype_name(key) if isinstance(key, torch.dtype) else str(key)
            if key_name == name:
                base.update(value)
    return base


@dataclass
class Comparison:
    """The figures of one output against its reference, and whether they pass."""

    passed: bool
    figures: dict[str, Any]
    reason: str = ""  # why it failed, in one line
    note: str = ""  # a passing shape that proves little (no signal), in one line
    peak: float = 0.0  # the reference's largest finite magnitude (the error map's noise floor needs it)


# Tensors are compared in chunks, each upcast to float64 on its own: a whole-tensor float64 copy
# of a 6 GB fp32 output would be 12 GB, and several such temporaries do not fit next to the
# problem's own tensors. A chunk is a CHUNKS_PER_TENSOR-th of the tensor, between MIN_CHUNK and
# CHUNK_ELEMENTS elements: the workspace (~96 bytes per chunk element) stays a fraction of the
# tensor at every size (a whole 16 Mi-element chunk of a 64 MB fp32 matmul output took 1.6 GB),
# and the launches per chunk stay negligible.
CHUNK_ELEMENTS = 1 << 24
MIN_CHUNK = 1 << 20
CHUNKS_PER_TENSOR = 32
# Per chunk element, an upper bound: float64 temporaries (out, ref, their finite parts, the error
# and the tolerance test's), boolean masks, and the chunks of non-contiguous inputs copied to be
# flattened. A GPU test checks it: 83 bytes were measured on an H200 (2026-12-01) with
# non-contiguous inputs; 96 bytes and 1 KiB on 2026-12-02, once the output's peak was kept for
# the noise floor, so the tolerance test now makes one temporary where it made two. Scalars (the
# reductions' results) take the fixed part.
WORKSPACE_BYTES_PER_ELEMENT = 12 * 8
WORKSPACE_FIXED_BYTES = 1 << 20


def chunk_elements(numel: int | None) -> int:
    """The chunk a tensor of ``numel`` elements is walked in (the largest chunk when unknown)."""
    if numel is None:
        return CHUNK_ELEMENTS
    return min(CHUNK_ELEMENTS, max(MIN_CHUNK, numel // CHUNKS_PER_TENSOR))


def workspace_bytes(numel: int | None = None, chunk: int | None = None) -> int:
    """The most extra memory one ``compare`` (or ``fingerprint``) of ``numel`` elements takes:
    bounded by the chunk, however large the tensors."""
    chunk = chunk or chunk_elements(numel)
    return (chunk if numel is None else min(numel, chunk)) * WORKSPACE_BYTES_PER_ELEMENT + WORKSPACE_FIXED_BYTES


def compare(out: torch.Tensor, ref: torch.Tensor, tolerances: dict | None = None, *,
            chunk: int | None = None) -> Comparison:
    """Compare one output tensor with the reference tensor of the same shape and dtype.

    Streams over ``chunk``-element pieces (default: ``chunk_elements``) in row-major order: two
    passes (the reference's peak first, since the relative-error floor depends on it), never a
    whole-size float64 tensor.
    """
    limits = thresholds_for(ref.dtype, tolerances)
    out, ref = out.detach(), ref.detach()
    n = ref.numel()
    chunk = chunk or chunk_elements(n)
    figures: dict[str, Any] = {"dtype": dtype_name(ref.dtype), "numel": n}
    if n == 0:
        return Comparison(True, figures)
    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"compare: output shape {list(out.shape)} differs from the reference's {list(ref.shape)}")

    peak, kept = 0.0, None
    for _, r_piece in flat_chunks(ref, chunk):
        r = r_piece.to(torch.float64)
        largest = float(r.abs().max())  # NaN or inf when the piece holds one: then the careful way
        peak = max(peak, largest if math.isfinite(largest) else float(torch.where(torch.isfinite(r), r.abs(), 0.0).max()))
        kept = r if n <= chunk else None  # one piece: the second pass reuses its float64 copy
    # Relative error with a floor: magnitudes under eps·peak (values that rounded to ~zero) are
    # judged against eps·peak, or an output of 1e-44 against a reference of 0 reads as 1e+262.
    eps = torch.finfo(ref.dtype).eps if ref.dtype.is_floating_point else 1.0
    floor = max(eps * peak, torch.finfo(torch.float64).tiny)
    atol, rtol = limits.get("atol"), limits.get("rtol")
    acc = _Sums(floor, atol, rtol)
    for (offset, o_piece), (_, r_piece) in zip(flat_chunks(out, chunk), flat_chunks(ref, chunk)):
        acc.add(offset, o_piece.to(torch.float64), kept if kept is not None else r_piece.to(torch.float64))

    n_bad = acc.nonfinite
    figures["nonfinite"] = n_bad
    figures["worst_index"] = list(_unravel(acc.worst_flat, ref.shape))
    figures["worst_out"] = acc.worst_out
    figures["worst_ref"] = acc.worst_ref
    mse = acc.squared_error / n
    figures.update(
        max_abs=acc.max_abs,
        max_rel=acc.max_rel if n_bad == 0 else math.inf,
        mse=mse if n_bad == 0 else math.inf,
        rmse=math.sqrt(mse) if n_bad == 0 else math.inf,
        psnr=_psnr(peak, mse) if n_bad == 0 else -math.inf,
        cossim=_cossim(acc.dot, acc.out_squares, acc.ref_squares) if n_bad == 0 else math.nan,
    )

    if n_bad:
        idx = figures["worst_index"]
        return Comparison(False, figures, f"{n_bad} non-finite value(s) where the reference is finite, first at {idx}",
                          peak=peak)
    if acc.pattern_mismatches:
        return Comparison(False, figures, "NaN/Inf pattern differs from the reference's", peak=peak)

    reasons = []
    if atol is not None and rtol is not None:
        n_over = acc.beyond_tolerance
        figures["mismatched"] = n_over
        if n_over:
            reasons.append(
                f"{n_over}/{n} elements beyond atol={atol:g} + rtol={rtol:g}·|ref| "
                f"(worst at {figures['worst_index']}: kernel {figures['worst_out']:.6g}, reference {figures['worst_ref']:.6g})"
            )
    noise = noise_floor(ref.dtype, limits, peak)
    signal_free = max(peak, acc.out_peak) <= noise  # nothing for PSNR or cosine similarity to judge
    if limits.get("psnr") is not None and not signal_free and figures["psnr"] < limits["psnr"]:
        reasons.append(f"PSNR {figures['psnr']:.1f} dB < {limits['psnr']:g} dB")
    if limits.get("cossim") is not None and not signal_free and peak > 0 and figures["cossim"] < limits["cossim"]:
        reasons.append(f"cosine similarity {figures['cossim']:.6f} < {limits['cossim']:g}")
    figures["thresholds"] = {k: v for k, v in limits.items() if v is not None}
    note = ""
    if signal_free:
        figures["no_signal"], figures["noise_floor"] = True, noise
        note = f"{NO_SIGNAL} (max |out|, |ref| <= {noise:g})"
    return Comparison(not reasons, figures, "; ".join(reasons), note, peak)


def noise_floor(dtype: torch.dtype, limits: dict, peak: float) -> float:
    """The magnitude at or below which a value of ``dtype`` is noise, not signal: the atol where
    there is one; otherwise float32's default atol or ``NOISE_STEPS`` rounding steps of ``dtype``
    at the reference's ``peak``, whichever is larger."""
    atol = limits.get("atol")
    if atol is not None:
        return float(atol)
    if not dtype.is_floating_point:
        return 0.0
    return max(float(DEFAULT_TOLERANCES["float32"]["atol"]), NOISE_STEPS * rounding_step(dtype, peak))


def rounding_step(dtype: torch.dtype, magnitude: float) -> float:
    """The spacing of ``dtype``'s values at ``magnitude``: ``eps`` times its power of two, and the
    smallest subnormal below the normal range."""
    info = torch.finfo(dtype)
    subnormal = info.smallest_normal * info.eps
    if not math.isfinite(magnitude) or magnitude < info.smallest_normal:
        return subnormal
    return info.eps * 2.0 ** math.floor(math.log2(magnitude))


class _Sums:
    """What ``compare`` accumulates over the chunks: counts, maxima, sums, the worst element.

    Per element, with ``fin_o``/``fin_r`` the values where both (resp. the reference) are finite
    and 0 elsewhere: ``err = fin_o - fin_r``; ``diff = |err|``, or inf where the output is not
    finite but the reference is. The worst element is the first maximum of ``diff``.
    """

    def __init__(self, floor: float, atol: float | None, rtol: float | None):
        self.floor, self.atol, self.rtol = floor, atol, rtol
        self.nonfinite = self.pattern_mismatches = self.beyond_tolerance = 0
        self.max_abs, self.max_rel, self.out_peak = -1.0, 0.0, 0.0
        self.worst_flat, self.worst_out, self.worst_ref = 0, math.nan, math.nan
        self.squared_error = self.dot = self.out_squares = self.ref_squares = 0.0

    def add(self, offset: int, o: torch.Tensor, r: torch.Tensor) -> None:
        """Fold in one chunk (float64; never written to: either may be the caller's tensor)."""
        ref_squares, out_squares = float(r @ r), float(o @ o)
        if math.isfinite(ref_squares) and math.isfinite(out_squares):
            self._add_finite(offset, o, r, out_squares, ref_squares)
        else:  # a NaN or an inf in either (or squares past float64's range): element by element
            self._add_any(offset, o, r)

    def _add_finite(self, offset: int, o: torch.Tensor, r: torch.Tensor, out_squares: float, ref_squares: float) -> None:
        """``_add_any`` where every element of both is finite (their squares' sums are): the same
        figures, bit for bit, without the masks — the checks' common case, half the passes."""
        self.dot += float(o @ r)
        self.out_squares += out_squares
        self.ref_squares += ref_squares
        low, high = torch.aminmax(o)
        self.out_peak = max(self.out_peak, -float(low), float(high))
        diff = torch.sub(o, r)
        self.squared_error += float(diff @ diff)
        diff.abs_()
        self._note_worst(offset, diff, o, r)
        self._add_relative(diff, r.abs())

    def _add_relative(self, diff: torch.Tensor, magnitude: torch.Tensor) -> None:
        """Count the elements beyond atol + rtol·|ref| and keep the largest relative error, with
        one temporary beside ``magnitude`` (which it overwrites): the chunk workspace's peak."""
        if self.atol is not None and self.rtol is not None:
            self.beyond_tolerance += int((diff > magnitude.mul(self.rtol).add_(self.atol)).sum())
        self.max_rel = max(self.max_rel, float(torch.div(diff, magnitude.clamp_min_(self.floor), out=magnitude).max()))

    def _note_worst(self, offset: int, diff: torch.Tensor, o: torch.Tensor, r: torch.Tensor) -> None:
        worst = int(torch.argmax(diff))
        worst_value = float(diff[worst])
        if worst_value > self.max_abs:  # strictly: an earlier chunk keeps a tie, as argmax does
            self.max_abs = worst_value
            self.worst_flat = offset + worst
            self.worst_out, self.worst_ref = float(o[worst]), float(r[worst])

    def _add_any(self, offset: int, o: torch.Tensor, r: torch.Tensor) -> None:
        ref_finite = torch.isfinite(r)
        both = torch.isfinite(o) & ref_finite
        bad = ref_finite & ~both
        self.nonfinite += int(bad.sum())
        self.pattern_mismatches += int(((~ref_finite) & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))).sum())
        fin_r = torch.where(ref_finite, r, 0.0)
        fin_o = torch.where(both, o, 0.0)
        del ref_finite, both
        self.out_peak = max(self.out_peak, float(fin_o.abs().max()))
        self.dot += float(fin_o @ fin_r)
        self.out_squares += float(fin_o @ fin_o)
        self.ref_squares += float(fin_r @ fin_r)
        err = fin_o.sub_(fin_r)  # fin_o is not needed any more: the error takes its place
        self.squared_error += float(err @ err)
        # In place, the error becomes |error|, inf where the output is not finite. It holds no
        # NaN (finite minus finite never is), and argmax would rank one first anyway.
        diff = err.abs_().masked_fill_(bad, math.inf)
        del err, bad
        self._note_worst(offset, diff, o, r)
        del o, r
        self._add_relative(diff, fin_r.abs_())


def flat_chunks(t: torch.Tensor, chunk: int | None = None) -> Iterator[tuple[int, torch.Tensor]]:
    """``(flat offset, 1-D piece)`` covering ``t`` in row-major order, each piece at most ``chunk``
    elements (default: ``chunk_elements`` of ``t``).

    The pieces follow ``t``'s shape, not its strides, so two tensors of one shape give the same
    offsets however they are laid out. A contiguous tensor's pieces are views; a non-contiguous
    one's are copies of one piece at a time.
    """
    chunk = max(1, int(chunk or chunk_elements(t.numel())))

    def walk(prefix: tuple, dims: tuple[int, ...], offset: int) -> Iterator[tuple[int, tuple]]:
        if math.prod(dims) <= chunk:
            yield offset, prefix
            return
        inner = math.prod(dims[1:])
        if inner <= chunk:
            step = chunk // inner
            for start in range(0, dims[0], step):
                yield offset + start * inner, (*prefix, slice(start, min(start + step, dims[0])))
        else:
            for i in range(dims[0]):
                yield from walk((*prefix, i), dims[1:], offset + i * inner)

    for offset, index in walk((), tuple(t.shape), 0):
        yield offset, t[index].reshape(-1)


def _psnr(peak: float, mse: float) -> float:
    """Peak signal-to-noise ratio in dB, with the reference's largest magnitude as the peak."""
    if mse == 0.0:
        return math.inf
    if peak == 0.0:
        return -math.inf
    return 10.0 * math.log10(peak * peak / mse)


def _cossim(dot: float, out_squares: float, ref_squares: float) -> float:
    """Cosine similarity from the sums ``Σ o·r``, ``Σ o²`` and ``Σ r²``."""
    na, nb = math.sqrt(out_squares), math.sqrt(ref_squares)
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))
