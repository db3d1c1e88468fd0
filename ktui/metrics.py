"""Error metrics between a candidate's output and the reference's, and the pass/fail rule.

All metrics are computed in float64 on the tensors' device. Thresholds depend on the output
dtype: float32/float64 are judged element by element (``|out - ref| <= atol + rtol·|ref|``),
while low-precision outputs (fp16, bf16, fp8) are judged mainly by PSNR and cosine similarity,
since a few elements one rounding step apart are normal there but a wrong algorithm shows up as
a drop in signal-to-noise. A NaN or Inf where the reference is finite never passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

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


def compare(out: torch.Tensor, ref: torch.Tensor, tolerances: dict | None = None) -> Comparison:
    """Compare one output tensor with the reference tensor of the same shape and dtype."""
    limits = thresholds_for(ref.dtype, tolerances)
    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    n = r.numel()
    figures: dict[str, Any] = {"dtype": dtype_name(ref.dtype), "numel": n}
    if n == 0:
        return Comparison(True, figures)

    ref_finite = torch.isfinite(r)
    bad = ~torch.isfinite(o) & ref_finite
    mismatched_nonfinite = (~ref_finite) & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))
    n_bad = int(bad.sum())
    figures["nonfinite"] = n_bad

    diff = torch.where(ref_finite, (o - r).abs(), torch.zeros_like(r))
    diff = torch.where(bad, torch.full_like(diff, math.inf), diff)
    worst_flat = int(torch.argmax(torch.where(torch.isnan(diff), torch.full_like(diff, math.inf), diff)))
    figures["worst_index"] = list(_unravel(worst_flat, r.shape))
    figures["worst_out"] = float(o.reshape(-1)[worst_flat])
    figures["worst_ref"] = float(r.reshape(-1)[worst_flat])

    fin_o = torch.where(ref_finite & ~bad, o, torch.zeros_like(o))
    fin_r = torch.where(ref_finite, r, torch.zeros_like(r))
    err = fin_o - fin_r
    max_abs = float(diff.max())
    mse = float((err * err).mean())
    peak = float(fin_r.abs().max())
    # Relative error with a floor: magnitudes under eps·peak (values that rounded to ~zero) are
    # judged against eps·peak, or an output of 1e-44 against a reference of 0 reads as 1e+262.
    eps = torch.finfo(ref.dtype).eps if ref.dtype.is_floating_point else 1.0
    floor = max(eps * peak, torch.finfo(torch.float64).tiny)
    rel = err.abs() / fin_r.abs().clamp_min(floor)
    figures.update(
        max_abs=max_abs,
        max_rel=float(rel.max()) if n_bad == 0 else math.inf,
        mse=mse if n_bad == 0 else math.inf,
        rmse=math.sqrt(mse) if n_bad == 0 else math.inf,
        psnr=_psnr(peak, mse) if n_bad == 0 else -math.inf,
        cossim=_cossim(fin_o, fin_r) if n_bad == 0 else math.nan,
    )

    if n_bad:
        idx = figures["worst_index"]
        return Comparison(False, figures, f"{n_bad} non-finite value(s) where the reference is finite, first at {idx}")
    if int(mismatched_nonfinite.sum()):
        return Comparison(False, figures, "NaN/Inf pattern differs from the reference's")

    reasons = []
    atol, rtol = limits.get("atol"), limits.get("rtol")
    if atol is not None and rtol is not None:
        allowed = atol + rtol * fin_r.abs()
        over = err.abs() > allowed
        n_over = int(over.sum())
        figures["mismatched"] = n_over
        if n_over:
            reasons.append(
                f"{n_over}/{n} elements beyond atol={atol:g} + rtol={rtol:g}·|ref| "
                f"(worst {figures['worst_index']}: {figures['worst_out']:.6g} vs {figures['worst_ref']:.6g})"
            )
    if limits.get("psnr") is not None and figures["psnr"] < limits["psnr"]:
        reasons.append(f"PSNR {figures['psnr']:.1f} dB < {limits['psnr']:g} dB")
    if limits.get("cossim") is not None and peak > 0 and figures["cossim"] < limits["cossim"]:
        reasons.append(f"cosine similarity {figures['cossim']:.6f} < {limits['cossim']:g}")
    figures["thresholds"] = {k: v for k, v in limits.items() if v is not None}
    return Comparison(not reasons, figures, "; ".join(reasons))


def _psnr(peak: float, mse: float) -> float:
    """Peak signal-to-noise ratio in dB, with the reference's largest magnitude as the peak."""
    if mse == 0.0:
        return math.inf
    if peak == 0.0:
        return -math.inf
    return 10.0 * math.log10(peak * peak / mse)


def _cossim(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.reshape(-1), b.reshape(-1)
    na, nb = float(a.norm()), float(b.norm())
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float((a @ b) / (na * nb))


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))
