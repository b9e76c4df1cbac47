"""Property tests: `tileblend.blend` equals the row loop of `tileblend.reference` bit for bit, for any input.

Hypothesis draws the method, rank, lengths along the blended axis, extent, dtype and memory layout of both tiles; each
case compares the whole storage `b` lives in, so rows past the seam and memory around a view must stay untouched.
`method`, `dtype` and `random_values` are fixtures of tests/conftest.py.
"""

import hypothesis.strategies as st
import torch
from hypothesis import HealthCheck, given, settings

from tileblend import blend, reference
from tileblend.blend import BLEND_AXES, DTYPES
from tileblend.compare import bitwise_equal


# Deterministic and bounded: the same 150 examples per test on every run.
EXAMPLES = settings(derandomize=True, deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])

METHODS = list(BLEND_AXES)
FLOAT_DTYPES = list(DTYPES.values())
LAYOUTS = ["contiguous", "step", "offset", "transposed", "channels_last"]


def special_values(shape, dtype, seed):
    """Infinities, NaN, signed zeros, subnormals, the largest finite values and ordinary numbers, mixed at random."""
    info = torch.finfo(dtype)
    pool = [float("inf"), -float("inf"), float("nan"), 0.0, -0.0, info.tiny / 4, -info.tiny / 2, info.tiny]
    pool += [info.max, -info.max, 1.0, -3.0, 0.5]
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(len(pool), shape, generator=generator)
    return torch.tensor(pool, dtype=torch.float64).to(dtype)[index]


def laid_out(values: torch.Tensor, layout: str, dim: int):
    """Return (base, view): a tensor holding `values` in `layout`, and the function that takes `base` to it.

    `base` is what the test compares afterwards: for views into a bigger tensor it includes the memory around the view.
    """
    if layout == "step":  # every other element along `dim`, inside a tensor twice as long
        shape = list(values.shape)
        shape[dim] *= 2
        base = torch.zeros(shape, dtype=values.dtype)
        base[(slice(None),) * (dim % values.dim()) + (slice(None, None, 2),)] = values
        return base, lambda t: t[(slice(None),) * (dim % values.dim()) + (slice(None, None, 2),)]
    if layout == "offset":  # a window that starts one element in, inside a tensor two elements longer
        shape = list(values.shape)
        shape[dim] += 2
        base = torch.full(shape, 7.0, dtype=values.dtype)
        base.narrow(dim, 1, values.shape[dim]).copy_(values)
        return base, lambda t: t.narrow(dim, 1, values.shape[dim])
    if layout == "transposed":  # all dimensions reversed in memory
        order = list(reversed(range(values.dim())))
        return values.permute(order).contiguous(), lambda t: t.permute(order)
    if layout == "channels_last" and values.dim() in (4, 5):
        memory_format = torch.channels_last if values.dim() == 4 else torch.channels_last_3d
        return values.contiguous(memory_format=memory_format), lambda t: t
    return values.clone(), lambda t: t


@st.composite
def blend_cases(draw, dtypes=FLOAT_DTYPES):
    method = draw(st.sampled_from(METHODS))
    axis = BLEND_AXES[method]
    rank = draw(st.integers(min_value=max(2, -axis), max_value=6))
    shape = [draw(st.integers(1, 3)) for _ in range(rank)]
    a_shape, b_shape = list(shape), list(shape)
    lengths = st.integers(0, 20)
    a_shape[axis] = draw(lengths)
    b_shape[axis] = draw(lengths)
    return {
        "method": method,
        "a_shape": a_shape,
        "b_shape": b_shape,
        "extent": draw(st.integers(-3, 24)),
        "dtype": draw(st.sampled_from(dtypes)),
        "a_layout": draw(st.sampled_from(LAYOUTS)),
        "a_dim": draw(st.integers(0, rank - 1)),
        "b_layout": draw(st.sampled_from(LAYOUTS)),
        "b_dim": draw(st.integers(0, rank - 1)),
        "seed": draw(st.integers(0, 2**16)),
    }


def check_against_loop(case, make_values):
    """Blend with `tileblend.blend` and with the loop on copies of the same storage; compare every bit of it."""
    method, extent = case["method"], case["extent"]
    a_base, a_view = laid_out(
        make_values(case["a_shape"], case["dtype"], case["seed"]), case["a_layout"], case["a_dim"]
    )
    b_base, b_view = laid_out(
        make_values(case["b_shape"], case["dtype"], case["seed"] + 1), case["b_layout"], case["b_dim"]
    )
    a_before, expected_base = a_base.clone(), b_base.clone()
    reference.REFERENCE_FUNCTIONS[method](a_view(a_base.clone()), b_view(expected_base), extent)

    b = b_view(b_base)
    result = getattr(blend, method)(a_view(a_base), b, extent)

    assert result is b
    assert bitwise_equal(expected_base, b_base)
    assert bitwise_equal(a_before, a_base)


@EXAMPLES
@given(case=blend_cases())
def test_equals_loop(case, random_values):
    check_against_loop(case, random_values)


@EXAMPLES
@given(blend_cases())
def test_equals_loop_on_special_values(case):
    check_against_loop(case, special_values)


WIDE_ROWS = {4096: 20, 16384: 24, 2**20: 4}
"""Elements per row of video-sized seams, with the longest tile drawn for each."""


@settings(derandomize=True, deadline=None, max_examples=24, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_wide_rows_equal_loop(data, random_values):
    """Video-sized rows, on every layout."""
    method = data.draw(st.sampled_from(METHODS))
    axis = BLEND_AXES[method]
    row = data.draw(st.sampled_from(sorted(WIDE_ROWS)))
    a_shape = [2, row // 2] + [1] * (-1 - axis)
    b_shape = list(a_shape)
    a_shape.insert(len(a_shape) + axis + 1, data.draw(st.integers(1, WIDE_ROWS[row])))
    b_shape.insert(len(b_shape) + axis + 1, data.draw(st.integers(1, WIDE_ROWS[row])))
    case = {
        "method": method,
        "a_shape": a_shape,
        "b_shape": b_shape,
        "extent": data.draw(st.integers(1, WIDE_ROWS[row])),
        "dtype": data.draw(st.sampled_from(FLOAT_DTYPES)),
        "a_layout": data.draw(st.sampled_from(LAYOUTS)),
        "a_dim": data.draw(st.integers(0, len(a_shape) - 1)),
        "b_layout": data.draw(st.sampled_from(LAYOUTS)),
        "b_dim": data.draw(st.integers(0, len(a_shape) - 1)),
        "seed": data.draw(st.integers(0, 2**16)),
    }
    check_against_loop(case, random_values)


@EXAMPLES
@given(case=blend_cases())
def test_rows_past_the_seam_untouched(case, random_values):
    """Rows at and after `min(len_a, len_b, extent)` keep their bits; so do all rows when that is <= 0."""
    axis = BLEND_AXES[case["method"]]
    a = random_values(case["a_shape"], case["dtype"], case["seed"])
    b = random_values(case["b_shape"], case["dtype"], case["seed"] + 1)
    before = b.clone()
    getattr(blend, case["method"])(a, b, case["extent"])
    n = max(0, min(a.shape[axis], b.shape[axis], case["extent"]))
    assert bitwise_equal(before.narrow(axis, n, b.shape[axis] - n), b.narrow(axis, n, b.shape[axis] - n))


def test_a_is_b(method, dtype, random_values):
    for extent in (1, 2, 3, 5, 8, 12):
        b = random_values([2, 3, 12, 13, 14], dtype, extent)
        expected = reference.REFERENCE_FUNCTIONS[method](b.clone(), b.clone(), extent)
        assert getattr(blend, method)(b, b, extent) is b
        assert bitwise_equal(expected, b)


def test_weights_are_python_doubles(dtype):
    """Blending ones into zeros (and back) exposes the weights: `1 - y / n` and `y / n` as Python computes them, cast
    once to the dtype's opmath type (float64 for float64, float32 otherwise) and rounded to `dtype`."""
    opmath = torch.float64 if dtype == torch.float64 else torch.float32
    for n in [*range(1, 601), 1000, 1023, 1024, 2047, 4095, 4096]:
        weight_a = torch.tensor([[1 - y / n] for y in range(n)], dtype=torch.float64).to(opmath).to(dtype)
        weight_b = torch.tensor([[y / n] for y in range(n)], dtype=torch.float64).to(opmath).to(dtype)
        ones, zeros = torch.ones(n, 3, dtype=dtype), torch.zeros(n, 3, dtype=dtype)
        assert bitwise_equal(weight_a.expand(n, 3), blend.blend_v(ones, zeros.clone(), n)), n
        assert bitwise_equal(weight_b.expand(n, 3), blend.blend_v(zeros, ones.clone(), n)), n


def test_extents_7_and_11_tell_a_true_division_from_one_through_the_reciprocal():
    """The upstream method test blends at extents 7 and 11 because there float32 `y * (1 / n)` (what CUDA computes when
    the divisor is a Python number) differs from `y / n` for some y; at the other extents of that test it does not."""

    def through_reciprocal_differs(n: int) -> bool:
        y = torch.arange(n, dtype=torch.float32)
        return not torch.equal(y * (torch.tensor(1.0) / n), y / torch.full_like(y, n))

    assert through_reciprocal_differs(7) and through_reciprocal_differs(11)
    assert not any(through_reciprocal_differs(n) for n in (1, 2, 3, 4))  # its other extents, once clipped


def test_float64_tiles_need_float64_weights():
    """The float64 branch of the blend is what keeps a float64 model's output: with the float32 weights of the other
    dtypes, a float64 blend differs from the loop."""
    a, b = (
        torch.randn(2, 3, 7, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) for seed in (0, 1)
    )
    expected = reference.blend_v(a, b.clone(), 7)
    y = torch.arange(7, dtype=torch.float32).view(-1, 1)
    n = torch.full_like(y, 7)
    float32_weights = b.clone()
    float32_weights.mul_(y / n).add_((a * ((n - y) / n)).to(b.dtype))
    assert not bitwise_equal(expected, float32_weights)
    assert bitwise_equal(expected, blend.blend_v(a, b.clone(), 7))
