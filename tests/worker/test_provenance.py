"""Provenance: the output's storage went through the module's kernels, and torch neither computed
it nor wrote values into it; allocations and constant fills do not count as torch's work."""

import pytest
import torch

from ktui.worker.provenance import Received, StorageLedger, inside_launch, judge

pytestmark = pytest.mark.unit


def handed(*tensors):
    received = Received()
    received.add(tensors)
    return received


def test_a_buffer_allocated_and_handed_to_a_kernel_comes_from_the_kernel():
    with StorageLedger() as ledger:
        out = torch.empty(8)
        out.zero_()
    assert judge([out.view(2, 4)], handed(out), ledger) is None


def test_an_output_torch_computed_is_named_with_the_op_that_made_it():
    x = torch.randn(8)
    with StorageLedger() as ledger:
        token = torch.empty(1)
        out = torch.softmax(x, dim=0)
    why = judge([out], handed(token, x), ledger)
    assert why.startswith("the output was computed by torch (aten._softmax)")


def test_values_torch_writes_into_a_kernel_buffer_are_torch_s_not_the_kernel_s():
    x = torch.randn(8)
    with StorageLedger() as ledger:
        out = torch.empty(8)
        out[:] = x * 2
    assert "torch wrote values into the output (aten.copy_)" in judge([out], handed(out), ledger)


def test_an_out_variant_is_a_write_too():
    x = torch.randn(8)
    with StorageLedger() as ledger:
        out = torch.empty(8)
        torch.add(x, x, out=out)
    assert "aten.add" in judge([out], handed(out), ledger)


def test_what_torch_does_inside_a_launch_is_the_kernel_s_work():
    # Triton's interpreter copies its arguments in and out with torch ops
    x = torch.randn(8)
    with StorageLedger() as ledger:
        out = torch.empty(8)
        with inside_launch():
            out.copy_(x)
    assert judge([out], handed(out), ledger) is None


def test_a_buffer_no_kernel_was_handed_is_not_the_kernel_s():
    with StorageLedger() as ledger:
        out = torch.empty(8)
        other = torch.empty(8)
    assert "never handed to the module's kernels" in judge([out], handed(other), ledger)


def test_a_view_of_a_handed_buffer_counts_as_that_buffer():
    with StorageLedger() as ledger:
        out = torch.empty(4, 4)
    assert judge([out[1]], handed(out), ledger) is None


def test_a_buffer_handed_inside_a_tma_descriptor_is_the_kernel_s():
    from triton.tools.tensor_descriptor import TensorDescriptor

    out, other = torch.empty(64, 64), torch.empty(64, 64)
    received = Received()
    received.add((TensorDescriptor.from_tensor(out, [16, 16]), 64))
    assert received.holds(out)
    assert not received.holds(other)
