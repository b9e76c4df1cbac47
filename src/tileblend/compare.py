"""Bitwise comparison of tensors, the only notion of "equal" tileblend uses."""

import torch


def bit_view(tensor: torch.Tensor) -> torch.Tensor:
    """An integer view of `tensor`'s bits (same shape), so that signed zeros, subnormals and infinities compare."""
    integer_type = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()]
    return tensor.contiguous().view(integer_type)


def bitwise_equal(expected: torch.Tensor, actual: torch.Tensor) -> bool:
    """Whether two tensors hold the same bits, NaN payloads aside.

    Every non-NaN element must have identical bits (so -0.0 differs from 0.0, and each infinity and subnormal must
    match), and NaNs must sit at the same positions. The sign and payload of a NaN are not compared: PyTorch does not
    define them, and on the CPU one kernel gives different NaN bits in its vectorized body and its scalar tail
    (bfloat16 `inf * 0.0` is 0xFFFF or 0x7FC0 by position), so no reordering of the same arithmetic can promise them.
    """
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False
    if not expected.is_floating_point():
        return torch.equal(expected, actual)
    nan = expected.isnan()
    if not torch.equal(nan, actual.isnan()):
        return False
    return torch.equal(bit_view(expected)[~nan], bit_view(actual)[~nan])
