"""The contract of `tileblend.blend` beyond values: autograd, aten-op counts and torch.compile.

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
    """`a` requires grad and `b = x * 1` is not a leaf: outputs and the gradients of `a` and `x` are the loop's."""
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


HALF_DTYPES = [torch.float16, torch.bfloat16]
FULL_DTYPES = [torch.float32, torch.float64]
CPU_PATHS = [
    # (dtypes, extent, elements per row, the form the CPU takes): each CPU threshold of docs/design.md, both sides.
    (HALF_DTYPES, 7, 30, "loop"),
    (HALF_DTYPES, 8, 30, "vectorized"),
    (HALF_DTYPES, 8, 4095, "vectorized"),
    (HALF_DTYPES, 8, 4096, "loop"),
    (HALF_DTYPES, 15, 4096, "loop"),
    (HALF_DTYPES, 16, 4096, "vectorized"),
    (HALF_DTYPES, 16, 16383, "vectorized"),
    (HALF_DTYPES, 16, 16384, "loop"),
    (FULL_DTYPES, 2, 30, "loop"),
    (FULL_DTYPES, 3, 30, "vectorized"),
    (FULL_DTYPES, 64, 20000, "vectorized"),
    (FULL_DTYPES, 3, 2**20 - 1, "vectorized"),
    (FULL_DTYPES, 3, 2**20, "loop"),
]


def wide_tiles(method, dtype, extent, row, device="cpu"):
    """Tiles of `extent` rows of `row` elements each along `method`'s axis."""
    shape = [row, extent] + [1] * (-1 - BLEND_AXES[method])
    return torch.randn(shape, device=device).to(dtype), torch.randn(shape, device=device).to(dtype)


@pytest.mark.parametrize(
    "dtype, extent, row, form",
    [(dtype, extent, row, form) for dtypes, extent, row, form in CPU_PATHS for dtype in dtypes],
    ids=lambda value: str(value).removeprefix("torch."),
)
def test_cpu_takes_the_documented_form(method, dtype, extent, row, form):
    """On the CPU the loop runs where it was measured faster: 7 ops per row there, the constant count elsewhere."""
    a, b = wide_tiles(method, dtype, extent, row)
    expected = reference.REFERENCE_FUNCTIONS[method](a, b.clone(), extent)
    ops = sum(count_aten_ops(getattr(blend, method), a, b.clone(), extent).values())
    vectorized_ops = sum(count_aten_ops(getattr(blend, method), *seam_tiles(method, dtype), 16).values())
    assert ops == (7 * extent if form == "loop" else vectorized_ops), f"{ops} aten ops"
    assert bitwise_equal(expected, getattr(blend, method)(a, b, extent))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_op_count_is_constant_for_every_row_width(method, dtype):
    """The CPU's thresholds do not apply on CUDA: from 3 rows on, any row width, one constant count."""
    counts = set()
    for row in (30, 20000, 2**20):
        for extent in (3, 8, 16) if row == 2**20 else (3, 8, 16, 64):
            a, b = wide_tiles(method, dtype, extent, row, device="cuda")
            counts.add(sum(count_aten_ops(getattr(blend, method), a, b, extent).values()))
    assert len(counts) == 1 and counts.pop() <= 16, f"aten ops per call: {sorted(counts)}"


@pytest.mark.parametrize("extent", [None, 8, 17, 128, 512])
def test_at_most_three_kernels_touch_the_seam(method, dtype, extent):
    extent = extent or first_vectorized_extent(dtype)
    a, b = seam_tiles(method, dtype)
    with SeamKernelCounter(numel=30 * extent) as counter:
        getattr(blend, method)(a, b, extent)
    assert 1 <= len(counter.ops) <= 3, f"seam-sized kernels: {counter.ops} (none: the row loop ran)"


def test_short_seams_take_the_row_loop(method, dtype):
    """Below the first vectorized extent the blend is the loop itself: exactly the loop's 7 aten ops per row."""
    a, b = seam_tiles(method, dtype)
    for extent in range(1, first_vectorized_extent(dtype)):
        ops = count_aten_ops(getattr(blend, method), a, b, extent)
        assert sum(ops.values()) == 7 * extent, f"extent {extent}: {dict(ops)}"


def test_loop_dispatches_seven_ops_per_row(method):
    """The baseline the vectorized form is measured against: select, mul, add and copy per row."""
    a, b = seam_tiles(method)
    for extent in (3, 128):
        assert sum(count_aten_ops(reference.REFERENCE_FUNCTIONS[method], a, b, extent).values()) == 7 * extent


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
    """grad, vjp, jvp, vmap, jacrev and jacfwd work as with the loop and give its bits."""
    generator = torch.Generator().manual_seed(1)
    a, x = torch.randn(1, 2, 12, 8, generator=generator), torch.randn(1, 2, 12, 8, generator=generator)
    apply = func_transforms()[transform]
    expected = apply(reference.REFERENCE_FUNCTIONS[method], a, x)
    actual = apply(getattr(blend, method), a, x)
    assert len(expected) == len(actual)
    for expected_tensor, actual_tensor in zip(expected, actual):
        assert bitwise_equal(expected_tensor, actual_tensor)


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


@pytest.mark.parametrize("extent", [2, 8, 16])
def test_tiles_the_loop_cannot_blend_raise_before_b_is_written(method, dtype, extent, random_tiles):
    """`a` of batch 2 does not fit `b` of batch 1: both forms raise, and `b` keeps every bit."""
    a = random_tiles(method, dtype, seed=6)[0]
    b = random_tiles(method, dtype, seed=8)[1][:1]
    before = b.clone()
    with pytest.raises(RuntimeError):
        reference.REFERENCE_FUNCTIONS[method](a, b.clone(), extent)
    with pytest.raises(RuntimeError):
        getattr(blend, method)(a, b, extent)
    assert bitwise_equal(before, b)


def test_gradients_of_negative_zero_equal_loop(method, dtype, random_tiles):
    """An upstream gradient of -0.0 gives the loop's signed zeros in the gradients of `a` and of `b`."""
    a_values, x_values = random_tiles(method, dtype, seed=9, a_length=13)

    def run(function):
        a = a_values.clone().requires_grad_()
        x = x_values.clone().requires_grad_()
        result = function(a, x * 1, 10)
        return torch.autograd.grad(result, [a, x], torch.full_like(result, -0.0))

    for expected, actual in zip(run(reference.REFERENCE_FUNCTIONS[method]), run(getattr(blend, method))):
        assert bitwise_equal(expected, actual)
