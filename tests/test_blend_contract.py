"""The contract of `tileblend.blend` beyond values: autograd, aten-op counts and torch.compile."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tileblend import blend, reference
from tileblend.blend import BLEND_AXES
from tileblend.compare import bitwise_equal
from tileblend.opcount import count_aten_ops


METHODS = list(BLEND_AXES)
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def tiles(method, dtype, length=16, seed=0, a_length=None):
    """Random tiles (2, 3, 6, 7, 8) with `length` rows along `method`'s axis (and `a_length` for `a`)."""
    axis = BLEND_AXES[method]
    generator = torch.Generator().manual_seed(seed)
    shapes = []
    for rows in (a_length or length, length):
        shape = [2, 3, 6, 7, 8]
        shape[axis] = rows
        shapes.append(shape)
    return [(torch.randn(shape, generator=generator, dtype=torch.float64) * 4).to(dtype) for shape in shapes]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("extent", [1, 2, 3, 5, 8, 12, 20])
def test_autograd_equals_loop(method, dtype, extent):
    """`a` requires grad and `b = x * 1` is not a leaf: outputs and the gradients of `a` and `x` are the loop's."""
    a_values, x_values = tiles(method, dtype, seed=extent, a_length=13)
    grad_output = tiles(method, dtype, seed=extent + 100)[1]

    def run(function):
        a = a_values.clone().requires_grad_()
        x = x_values.clone().requires_grad_()
        b = x * 1
        result = function(a, b, extent)
        assert result is b
        grad_a, grad_x = torch.autograd.grad(result, [a, x], grad_output)
        return result.detach(), grad_a, grad_x

    for expected, actual in zip(run(reference.REFERENCE_FUNCTIONS[method]), run(getattr(blend, method))):
        assert bitwise_equal(expected, actual)


class SeamKernelCounter(TorchDispatchMode):
    """Counts the aten ops that compute into a tensor of `numel` elements (views and allocations are not kernels)."""

    def __init__(self, numel):
        super().__init__()
        self.numel = numel
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        is_allocation = func.__name__.startswith(("empty", "new_empty"))
        if isinstance(out, torch.Tensor) and out.numel() == self.numel and not func.is_view and not is_allocation:
            self.ops.append(str(func))
        return out


def first_vectorized_extent(dtype):
    """Shorter seams take the row loop (fewer dispatches): up to 2 rows, and up to 7 rows for CPU half precision."""
    return 8 if dtype in (torch.float16, torch.bfloat16) else 3


def seam_tiles(method, dtype=torch.float32, length=512):
    """Tiles long enough for every extent up to 512, with 2 * 3 * 5 elements per row (never a count of rows)."""
    shape = [2, 3, 5, length] + [1] * (-1 - BLEND_AXES[method])
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_aten_op_count_is_constant_in_extent(method, dtype):
    a, b = seam_tiles(method, dtype)
    first = first_vectorized_extent(dtype)
    counts = {
        extent: sum(count_aten_ops(getattr(blend, method), a, b, extent).values()) for extent in range(first, 513)
    }
    extents_by_count = {}
    for extent, count in counts.items():
        extents_by_count.setdefault(count, []).append(extent)
    summary = {count: f"extents {min(e)}..{max(e)}" for count, e in extents_by_count.items()}
    assert len(extents_by_count) == 1, f"aten ops per call: {summary}"
    assert counts[first] <= 16


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_aten_op_count_is_constant_for_wide_rows(method, dtype):
    """Rows of 20000 elements, as in video latents (16 channels of 64x64 blended in time, 65536 per row)."""
    shape = [4, 5000, 32] + [1] * (-1 - BLEND_AXES[method])
    a, b = torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)
    extents = (first_vectorized_extent(dtype), 8, 16, 32)
    counts = {sum(count_aten_ops(getattr(blend, method), a, b, extent).values()) for extent in extents}
    assert len(counts) == 1, f"aten ops per call at extents {extents}: {sorted(counts)}"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("extent", [None, 8, 17, 128, 512])
def test_at_most_three_kernels_touch_the_seam(method, dtype, extent):
    extent = extent or first_vectorized_extent(dtype)
    a, b = seam_tiles(method, dtype)
    with SeamKernelCounter(numel=30 * extent) as counter:
        getattr(blend, method)(a, b, extent)
    assert 1 <= len(counter.ops) <= 3, f"seam-sized kernels: {counter.ops} (none: the row loop ran)"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_short_seams_take_the_row_loop(method, dtype):
    """Below the first vectorized extent the blend is the loop itself: exactly the loop's 7 aten ops per row."""
    a, b = seam_tiles(method, dtype)
    for extent in range(1, first_vectorized_extent(dtype)):
        ops = count_aten_ops(getattr(blend, method), a, b, extent)
        assert sum(ops.values()) == 7 * extent, f"extent {extent}: {dict(ops)}"


@pytest.mark.parametrize("method", METHODS)
def test_loop_dispatches_seven_ops_per_row(method):
    """The baseline the vectorized form is measured against: select, mul, add and copy per row."""
    a, b = seam_tiles(method)
    for extent in (3, 128):
        assert sum(count_aten_ops(reference.REFERENCE_FUNCTIONS[method], a, b, extent).values()) == 7 * extent


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_fullgraph(method, backend):
    """Compiles without a graph break and gives the loop's bits, in place."""
    torch._dynamo.reset()
    compiled = torch.compile(getattr(blend, method), backend=backend, fullgraph=True)
    for dtype in (torch.float32, torch.bfloat16):
        a, b = tiles(method, dtype, seed=3, a_length=13)
        expected = reference.REFERENCE_FUNCTIONS[method](a, b.clone(), 10)
        result = compiled(a, b, 10)
        assert result is b
        assert bitwise_equal(expected, b)
    torch._dynamo.reset()
