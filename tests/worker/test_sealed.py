"""The harness's own copies are checksummed on their device before user code runs: any byte that
moves is named; the same bytes, however chunked or laid out, give the same checksum."""

import pytest
import torch

from ktui.worker.integrity import Sealed, checksums

pytestmark = pytest.mark.unit

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.bool, torch.complex128, torch.float64]


def sample(dtype, shape=(5, 13)):
    t = torch.randn(shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 7
    return (t > 0) if dtype is torch.bool else t.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("chunk", (1, 4, 10**9))
def test_a_checksum_is_the_same_in_chunks_and_any_layout_and_moves_with_one_flipped_bit(dtype, chunk):
    t = sample(dtype)
    whole = checksums(t)
    assert checksums(t, chunk) == whole
    assert checksums(t.t().contiguous().t(), chunk) == whole  # the values, not the strides
    flipped = t.clone()
    flipped.view(-1)[29:30].view(torch.uint8)[0] ^= 1  # one bit of one element
    assert checksums(flipped, chunk) != whole


def test_nan_payloads_and_negative_zero_count_as_bytes_not_values():
    t = torch.tensor([float("nan"), 0.0, 1.0])
    assert checksums(t) == checksums(t.clone())
    negative = t.clone()
    negative[1] = -0.0
    assert checksums(negative) != checksums(t)


def test_a_permutation_moves_the_checksum():
    t = torch.arange(12, dtype=torch.float32)
    assert checksums(t.flip(0)) != checksums(t)


def test_sealed_names_the_copy_that_changed_by_its_label_and_position():
    x, y = torch.randn(100), torch.randn(7)
    kept = (x.clone(), y.clone())
    sealed = Sealed({"the harness's private copy of input": kept})
    assert sealed.changed() == []
    kept[1].zero_()
    assert sealed.changed() == ["the harness's private copy of input 1"]
    kept[0][3] = 1e9
    assert sealed.changed() == ["the harness's private copy of input 0 and 1"]


def test_empty_and_meta_tensors_have_a_checksum_that_never_moves():
    sealed = Sealed({"kept": (torch.empty(0), torch.empty(3, device="meta"))})
    assert sealed.changed() == []
