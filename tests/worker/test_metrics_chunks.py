"""``compare`` streams over chunks: its figures and verdicts are those of a whole-tensor computation.

The oracle below is the whole-tensor float64 computation ``compare`` used before it streamed,
kept verbatim (plus the noise floor's rule, added since) so that chunking can be checked against
it at awkward sizes with tiny chunks.
"""

import math

import pytest
import torch

from ktui.worker.metrics import _psnr, _Sums, compare, flat_chunks, noise_floor, thresholds_for

pytestmark = pytest.mark.unit


def whole_compare(out, ref, tolerances=None):
    """The pre-chunking ``compare``: (passed, figures, reason), every temporary whole-size."""
    limits = thresholds_for(ref.dtype, tolerances)
    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    n = r.numel()
    figures = {"dtype": str(ref.dtype).removeprefix("torch."), "numel": n}
    if n == 0:
        return True, figures, ""
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
    eps = torch.finfo(ref.dtype).eps if ref.dtype.is_floating_point else 1.0
    floor = max(eps * peak, torch.finfo(torch.float64).tiny)
    rel = err.abs() / fin_r.abs().clamp_min(floor)
    figures.update(
        max_abs=max_abs,
        max_rel=float(rel.max()) if n_bad == 0 else math.inf,
        mse=mse if n_bad == 0 else math.inf,
        rmse=math.sqrt(mse) if n_bad == 0 else math.inf,
        psnr=_psnr(peak, mse) if n_bad == 0 else -math.inf,
        cossim=_whole_cossim(fin_o, fin_r) if n_bad == 0 else math.nan,
    )
    if n_bad:
        return False, figures, f"{n_bad} non-finite value(s) where the reference is finite, first at {figures['worst_index']}"
    if int(mismatched_nonfinite.sum()):
        return False, figures, "NaN/Inf pattern differs from the reference's"
    reasons = []
    atol, rtol = limits.get("atol"), limits.get("rtol")
    if atol is not None and rtol is not None:
        n_over = int((err.abs() > atol + rtol * fin_r.abs()).sum())
        figures["mismatched"] = n_over
        if n_over:
            reasons.append(
                f"{n_over}/{n} elements beyond atol={atol:g} + rtol={rtol:g}·|ref| "
                f"(worst at {figures['worst_index']}: kernel {figures['worst_out']:.6g}, reference {figures['worst_ref']:.6g})"
            )
    noise = noise_floor(ref.dtype, limits, peak)
    signal_free = max(peak, float(fin_o.abs().max())) <= noise
    if limits.get("psnr") is not None and not signal_free and figures["psnr"] < limits["psnr"]:
        reasons.append(f"PSNR {figures['psnr']:.1f} dB < {limits['psnr']:g} dB")
    if limits.get("cossim") is not None and not signal_free and peak > 0 and figures["cossim"] < limits["cossim"]:
        reasons.append(f"cosine similarity {figures['cossim']:.6f} < {limits['cossim']:g}")
    figures["thresholds"] = {k: v for k, v in limits.items() if v is not None}
    if signal_free:
        figures["no_signal"], figures["noise_floor"] = True, noise
    return not reasons, figures, "; ".join(reasons)


def _whole_cossim(a, b):
    a, b = a.reshape(-1), b.reshape(-1)
    na, nb = float(a.norm()), float(b.norm())
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float((a @ b) / (na * nb))


def _unravel(flat, shape):
    idx = []
    for size in reversed(shape):
        idx.append(flat % size)
        flat //= size
    return tuple(reversed(idx))


# Sums differ from the whole-tensor ones by float64 summation order only.
SUMMED = {"mse", "rmse", "psnr", "cossim"}


def assert_same(out, ref, chunk, tolerances=None):
    got = compare(out, ref, tolerances, chunk=chunk)
    passed, figures, reason = whole_compare(out, ref, tolerances)
    assert got.passed == passed, (got.reason, reason)
    assert got.figures.keys() == figures.keys()
    for key, expected in figures.items():
        value = got.figures[key]
        if isinstance(expected, float) and math.isnan(expected):
            assert math.isnan(value), key
        elif key in SUMMED and isinstance(expected, float) and math.isfinite(expected):
            assert value == pytest.approx(expected, rel=1e-12, abs=1e-300), key
        else:
            assert value == expected, key
    if got.reason != reason:  # a summed figure printed in the reason may round differently
        assert not any(word in reason for word in ("PSNR", "cosine")), (got.reason, reason)
    return got


CHUNKS = (1, 2, 3, 7, 16, 35, 36, 10**9)


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("shape", [(1,), (37,), (3, 5, 7), (4, 1, 9), (2, 36)])
def test_chunked_figures_equal_the_whole_tensor_ones_at_awkward_sizes(shape, chunk):
    g = torch.Generator().manual_seed(sum(shape) * 31 + chunk)
    ref = torch.randn(shape, generator=g)
    close = ref * (1 + 1e-7 * torch.randn(shape, generator=g))
    wrong = ref + 1e-2 * torch.randn(shape, generator=g)
    assert assert_same(close, ref, chunk).passed
    assert not assert_same(wrong, ref, chunk).passed


@pytest.mark.parametrize("chunk", CHUNKS)
def test_the_worst_element_is_the_first_of_equal_errors_across_chunks(chunk):
    ref = torch.zeros(6, 6)
    out = ref.clone()
    out[1, 4] = out[3, 0] = out[5, 5] = 0.25  # three equal worst errors, in different chunks
    c = assert_same(out, ref, chunk)
    assert c.figures["worst_index"] == [1, 4]


NONFINITE = [
    ("nan where the reference is finite", lambda o, r: o.view(-1).__setitem__(slice(5, 30, 7), math.nan)),
    ("inf where the reference is finite", lambda o, r: o.view(-1).__setitem__(29, -math.inf)),
    ("same nan/inf pattern", lambda o, r: (r.view(-1).__setitem__([2, 17], math.nan),
                                           r.view(-1).__setitem__(33, math.inf),
                                           o.view(-1).__setitem__([2, 17], math.nan),
                                           o.view(-1).__setitem__(33, math.inf))),
    ("different pattern", lambda o, r: (r.view(-1).__setitem__([2, 17], math.nan),
                                        o.view(-1).__setitem__(2, math.nan),
                                        o.view(-1).__setitem__(17, math.inf))),
    ("finite where the reference is inf", lambda o, r: r.view(-1).__setitem__(20, math.inf)),
]


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("case", NONFINITE, ids=[name for name, _ in NONFINITE])
def test_nan_and_inf_patterns_give_the_whole_tensor_verdict(case, chunk):
    _, spoil = case
    g = torch.Generator().manual_seed(chunk)
    ref = torch.randn(5, 8, generator=g)
    out = ref.clone()
    spoil(out, ref)
    assert_same(out, ref, chunk)


@pytest.mark.parametrize("chunk", (1, 4, 10**9))
def test_an_all_zero_reference(chunk):
    ref = torch.zeros(3, 7)
    assert assert_same(ref.clone(), ref, chunk).passed
    out = ref.clone()
    out[2, 6] = 1e-3
    c = assert_same(out, ref, chunk)
    assert c.figures["psnr"] == -math.inf and c.figures["cossim"] == 0.0


@pytest.mark.parametrize("chunk", (1, 3, 10**9))
@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool])
def test_integer_and_bool_outputs(dtype, chunk):
    g = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        ref = torch.rand(4, 5, generator=g) > 0.5
    else:
        info = torch.iinfo(dtype)
        ref = torch.randint(info.min, info.max, (4, 5), generator=g, dtype=dtype)
    assert assert_same(ref.clone(), ref, chunk).passed
    out = ref.clone()
    out[3, 1] = ~out[3, 1] if dtype == torch.bool else out[3, 1] // 2 + 1
    assert not assert_same(out, ref, chunk).passed


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_low_and_double_precision(dtype):
    g = torch.Generator().manual_seed(3)
    ref64 = torch.randn(257, generator=g, dtype=torch.float64)
    noisy = (ref64 * (1 + 1e-3 * torch.randn(257, generator=g, dtype=torch.float64))).to(dtype)
    for chunk in (1, 16, 10**9):
        assert_same(noisy, ref64.to(dtype), chunk)
        assert_same((ref64 * 1.05).to(dtype), ref64.to(dtype), chunk)


def test_zero_dimensional_and_empty_tensors():
    for chunk in (1, 10**9):
        assert assert_same(torch.tensor(2.0), torch.tensor(2.0), chunk).passed
        c = assert_same(torch.tensor(2.5), torch.tensor(2.0), chunk)
        assert not c.passed and c.figures["worst_index"] == []
        assert_same(torch.tensor(math.nan), torch.tensor(1.0), chunk)
        assert assert_same(torch.empty(0, 3), torch.empty(0, 3), chunk).passed


@pytest.mark.parametrize("chunk", (1, 5, 6, 13, 10**9))
def test_non_contiguous_inputs(chunk):
    g = torch.Generator().manual_seed(chunk)
    base = torch.randn(6, 10, generator=g)
    ref = base.t()  # transposed
    out = (base + 1e-3 * (torch.rand(6, 10, generator=g) > 0.9)).t()
    assert_same(out, ref, chunk)
    assert_same(out.contiguous(), ref, chunk)  # one contiguous, one not: same element order
    strided = torch.randn(4, 20, generator=g)[:, ::3]
    assert_same(strided + 1e-6, strided, chunk)
    broadcast = torch.randn(1, 7, generator=g).expand(5, 7)
    out = broadcast.clone()
    out[4, 2] += 1.0
    c = assert_same(out, broadcast, chunk)
    assert c.figures["worst_index"] == [4, 2]


@pytest.mark.parametrize("chunk", (1, 4, 7, 100))
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 5), (1, 9, 1)])
def test_flat_chunks_cover_the_tensor_in_row_major_order(shape, chunk):
    t = torch.arange(math.prod(shape)).reshape(shape)
    for layout in (t, t.mT if t.dim() >= 2 else t):
        pieces = list(flat_chunks(layout, chunk))
        assert all(0 < p.numel() <= chunk for _, p in pieces)
        assert [o for o, _ in pieces] == [sum(p.numel() for _, p in pieces[:i]) for i in range(len(pieces))]
        assert torch.equal(torch.cat([p for _, p in pieces]), layout.reshape(-1))


@pytest.mark.parametrize("chunk", (1, 3, 8, 10**9))
def test_fingerprints_are_whole_tensor_sums_taken_in_chunks(chunk):
    from ktui.worker.integrity import fingerprint

    t = torch.randn(3, 7, generator=torch.Generator().manual_seed(5))
    flat = t.reshape(-1).to(torch.float64)
    (shape, dtype, total, weighted), = fingerprint(t, chunk)
    assert (shape, dtype) == ((3, 7), "torch.float32")
    assert float(total) == pytest.approx(float(flat.sum()), rel=1e-12)
    assert float(weighted) == pytest.approx(float((flat * torch.arange(1, 22, dtype=torch.float64)).sum()), rel=1e-12)
    assert fingerprint(t.t().contiguous().t(), chunk) == fingerprint(t, chunk)  # values, not layout
    assert fingerprint(t.flip(1), chunk) != fingerprint(t, chunk)  # the weighted sum sees the order


@pytest.mark.parametrize("shape", [(1,), (37,), (64, 129)])
def test_the_all_finite_path_gives_the_element_by_element_figures_bit_for_bit(shape):
    gen = torch.Generator().manual_seed(3)
    r = torch.randn(shape, generator=gen, dtype=torch.float64) * 100
    o = r + torch.randn(shape, generator=gen, dtype=torch.float64) * 1e-3
    o.view(-1)[0] = r.view(-1)[0]  # an exact element among the others
    fast, careful = _Sums(1e-12, 1e-5, 1e-4), _Sums(1e-12, 1e-5, 1e-4)
    fast._add_finite(5, o.reshape(-1), r.reshape(-1), float(o.reshape(-1) @ o.reshape(-1)),
                     float(r.reshape(-1) @ r.reshape(-1)))
    careful._add_any(5, o.reshape(-1), r.reshape(-1))
    assert vars(fast) == vars(careful)


def test_finite_values_whose_squares_overflow_are_judged_as_the_whole_tensor_is():
    ref = torch.tensor([1e200, -3e180, 2.0, 0.0], dtype=torch.float64)
    out = ref.clone()
    out[2] = 2.5
    assert not assert_same(out, ref, 10**9).passed
    assert assert_same(ref.clone(), ref, 2).passed


@pytest.mark.parametrize("with_nan", [False, True])
def test_compare_never_writes_into_float64_inputs(with_nan):
    ref = torch.tensor([[1.0, 2.0], [3.0, -4.0]], dtype=torch.float64)
    out = torch.tensor([[1.5, 2.0], [3.0, -4.5]], dtype=torch.float64)
    if with_nan:
        ref[0, 1], out[0, 1], out[1, 1] = math.nan, math.nan, math.inf
    before = (ref.clone(), out.clone())
    compare(out, ref)
    assert torch.allclose(ref, before[0], rtol=0, atol=0, equal_nan=True)
    assert torch.allclose(out, before[1], rtol=0, atol=0, equal_nan=True)
