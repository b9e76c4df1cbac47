"""The contract of `tileblend.blend` beyond values: autograd, torch.func, aten-op counts and torch.compile.

`method`, `dtype` (every floating dtype) and `random_tiles` are fixtures of tests/conftest.py.
"""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tileblend import blend, reference
from tileblend.blend import BLEND_AXES
from tileblend.compare import bitwise_equal
from tileblend.opcount import count_aten_ops


@pytest.mark.parametrize("extent", [1, 2, 3, 5, 8, 12, 20])
def test_autograd_equals_loop(method, dtype, extent, random_tiles):
    """`a` requires grad and `b = x * 1` is not a leaf: the output has the loop's bits and the gradients of `a` and
    `x` its values (a gradient that is zero may have the other sign: the loop's backward gives +0 for the rows it
    overwrote, the vectorized form's gives `grad * 0`)."""
    a_values, x_values = random_tiles(method, dtype, seed=extent, a_length=13)
    grad_output = random_tiles(method, dtype, seed=extent + 100)[1]

    def run(function):
        a = a_values.clone().requires_grad_()
        x = x_values.clone().requires_grad_()
        b = x * 1
        result = function(a, b, extent)
        assert result is b
        grad_a, grad_x = torch.autograd.grad(result, [a, x], grad_output)
        return result.detach(), grad_a, grad_x

    (expected, *expected_grads), (actual, *actual_grads) = (
        run(reference.REFERENCE_FUNCTIONS[method]),
        run(getattr(blend, method)),
    )
    assert bitwise_equal(expected, actual)
    for expected_grad, actual_grad in zip(expected_grads, actual_grads):
        assert torch.equal(expected_grad, actual_grad)


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


def seam_tiles(method, dtype=torch.float32, length=512):
    """Tiles long enough for every extent up to 512, with 2 * 3 * 5 elements per row (never a count of rows)."""
    shape = [2, 3, 5, length] + [1] * (-1 - BLEND_AXES[method])
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)


def test_aten_op_count_is_constant_in_extent(method, dtype):
    a, b = seam_tiles(method, dtype)
    counts = {
        extent: sum(count_aten_ops(getattr(blend, method), a, b, extent, views=False).values())
        for extent in range(1, 513)
    }
    extents_by_count = {}
    for extent, count in counts.items():
        extents_by_count.setdefault(count, []).append(extent)
    summary = {count: f"extents {min(e)}..{max(e)}" for count, e in extents_by_count.items()}
    assert len(extents_by_count) == 1, f"aten ops per call: {summary}"
    assert counts[1] <= 16


def wide_tiles(method, dtype, extent, row, device="cpu"):
    """Tiles of `extent` rows of `row` elements each along `method`'s axis."""
    shape = [row, extent] + [1] * (-1 - BLEND_AXES[method])
    return torch.randn(shape, device=device).to(dtype), torch.randn(shape, device=device).to(dtype)


@pytest.mark.cuda
def test_cuda_op_count_is_constant_for_every_row_width(method, dtype):
    """On CUDA too: any extent, any row width, one constant count."""
    counts = set()
    for row in (30, 20000, 2**20):
        for extent in (1, 3, 8, 16) if row == 2**20 else (1, 3, 8, 16, 64):
            a, b = wide_tiles(method, dtype, extent, row, device="cuda")
            counts.add(sum(count_aten_ops(getattr(blend, method), a, b, extent, views=False).values()))
    assert len(counts) == 1 and counts.pop() <= 16, f"aten ops per call: {sorted(counts)}"


@pytest.mark.parametrize("extent", [1, 8, 17, 128, 512])
def test_at_most_four_kernels_touch_the_seam(method, dtype, extent):
    """`a`'s product (and, in half precision, its cast to the tile's dtype), `b`'s in-place product, the add."""
    a, b = seam_tiles(method, dtype)
    with SeamKernelCounter(numel=30 * extent) as counter:
        getattr(blend, method)(a, b, extent)
    assert len(counter.ops) == (3 if dtype in (torch.float32, torch.float64) else 4), counter.ops


def test_loop_dispatches_four_kernels_per_row(method):
    """The baseline the vectorized form is measured against: two products, the add and the copy per row (and three
    row selections, views, which `tileblend bench` counts too)."""
    a, b = seam_tiles(method)
    for extent in (3, 128, 512):
        ops = count_aten_ops(reference.REFERENCE_FUNCTIONS[method], a, b, extent, views=False)
        assert ops == {"aten.mul.Tensor": 2 * extent, "aten.add.Tensor": extent, "aten.copy_.default": extent}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_fullgraph(method, backend, random_tiles):
    """Compiles without a graph break and gives the loop's bits, in place."""
    torch._dynamo.reset()
    compiled = torch.compile(getattr(blend, method), backend=backend, fullgraph=True)
    for dtype in (torch.float32, torch.bfloat16):
        a, b = random_tiles(method, dtype, seed=3, a_length=13)
        expected = reference.REFERENCE_FUNCTIONS[method](a, b.clone(), 10)
        result = compiled(a, b, 10)
        assert result is b
        assert bitwise_equal(expected, b)
    torch._dynamo.reset()


def func_transforms():
    """torch.func transforms of a blend into a fresh `b`, by name; each returns a tuple of tensors."""
    grad_output = torch.randn(1, 2, 12, 8, generator=torch.Generator().manual_seed(7))

    def blended(function):
        return lambda a, x: function(a, x * 1, 9)

    return {
        "grad": lambda f, a, x: torch.func.grad(lambda a, x: blended(f)(a, x).sum(), argnums=(0, 1))(a, x),
        "vjp": lambda f, a, x: torch.func.vjp(blended(f), a, x)[1](grad_output),
        "jvp": lambda f, a, x: torch.func.jvp(blended(f), (a, x), (grad_output, grad_output * 3)),
        "vmap": lambda f, a, x: (torch.func.vmap(blended(f))(a, x),),
        "jacrev": lambda f, a, x: (torch.func.jacrev(blended(f))(a, x),),
        "jacfwd": lambda f, a, x: (torch.func.jacfwd(blended(f), argnums=1)(a, x),),
    }


@pytest.mark.parametrize("transform", list(func_transforms()))
def test_torch_func_transforms_equal_loop(method, transform):
    """grad, vjp, jvp, vmap, jacrev and jacfwd work as with the loop and give its values (vmap: its bits; a zero
    derivative may have the other sign, as in `test_autograd_equals_loop`)."""
    generator = torch.Generator().manual_seed(1)
    a, x = torch.randn(1, 2, 12, 8, generator=generator), torch.randn(1, 2, 12, 8, generator=generator)
    apply = func_transforms()[transform]
    expected = apply(reference.REFERENCE_FUNCTIONS[method], a, x)
    actual = apply(getattr(blend, method), a, x)
    assert len(expected) == len(actual)
    for expected_tensor, actual_tensor in zip(expected, actual):
        assert torch.equal(expected_tensor, actual_tensor)
        assert transform != "vmap" or bitwise_equal(expected_tensor, actual_tensor)


@pytest.mark.parametrize("dual", ["a", "b", "both"])
def test_forward_ad_dual_tensors_equal_loop(method, dtype, dual, random_tiles):
    """Forward-mode AD: the primal and the tangent of the result are the loop's."""
    a_values, b_values = random_tiles(method, dtype, seed=4)
    a_tangent, b_tangent = random_tiles(method, dtype, seed=5)

    def run(function):
        with torch.autograd.forward_ad.dual_level():
            a = torch.autograd.forward_ad.make_dual(a_values, a_tangent) if dual != "b" else a_values
            b = b_values.clone()
            b = torch.autograd.forward_ad.make_dual(b, b_tangent) if dual != "a" else b
            result = function(a, b, 12)
            assert result is b
            return torch.autograd.forward_ad.unpack_dual(result)

    expected = run(reference.REFERENCE_FUNCTIONS[method])
    actual = run(getattr(blend, method))
    assert bitwise_equal(expected.primal, actual.primal)
    assert bitwise_equal(expected.tangent, actual.tangent)


@pytest.mark.parametrize("extent", [1, 8, 16])
def test_tiles_the_loop_cannot_blend_raise(method, dtype, extent, random_tiles):
    """`a` of batch 2 does not fit `b` of batch 1: both forms raise."""
    a = random_tiles(method, dtype, seed=6)[0]
    b = random_tiles(method, dtype, seed=8)[1][:1]
    with pytest.raises(RuntimeError):
        reference.REFERENCE_FUNCTIONS[method](a, b.clone(), extent)
    with pytest.raises(RuntimeError):
        getattr(blend, method)(a, b, extent)
