"""The vectorized tile blend: the single source of truth for tileblend and for the code it writes into diffusers.

`blend_v`, `blend_h` and `blend_t` replace diffusers' row-by-row loops (`tileblend.reference`) with a handful of
kernels over the whole seam. For every input they give the loop's result bit for bit (same rounding, signed zeros,
infinities and subnormals, NaN at the same places; NaN payloads are not defined by PyTorch, see `tileblend.compare`),
in float16, bfloat16, float32 and float64, on any device. The loop computes each row as

    round(round(a * (1 - y / n)) + round(b * (y / n)))

where `y / n` and `1 - y / n` are Python doubles cast once to the dtype's opmath type (float32 for the half types and
float32, float64 for float64), each product is rounded to the tensor's dtype, and the sum is rounded again. The
vectorized form keeps each of those steps: float64 weights cast to the opmath type, each product rounded into a tensor
of its operand's dtype, then one add. `torch.lerp`, `torch.addcmul` or fused kernels skip a rounding and are not exact.

The functions keep the loop's contract: `b` is blended IN PLACE and returned; callers rely on this because they keep
using the tile they passed in. On CUDA the weights are built on the device (no host-to-device copy, no sync), so a
blend can be captured in a CUDA graph. On other devices they are built on the host from Python floats and moved, so no
device needs float64 support.

`tileblend rewrite` copies `blend_tiles` into diffusers' `models/autoencoders/vae.py` and `blend_v`, `blend_h` and
`blend_t` into `AutoencoderMixin` as methods, so this module must only use torch.
"""

import torch


def blend_tiles(a: torch.Tensor, b: torch.Tensor, blend_extent: int, dim: int) -> torch.Tensor:
    r"""
    Blend the end of tile `a` into the start of tile `b` along `dim`, in place, bit for bit as a row-by-row loop does.

    With `n = min(a.shape[dim], b.shape[dim], blend_extent)`, row `y < n` of `b` becomes
    `a[-n + y] * (1 - y / n) + b[y] * (y / n)` with the loop's rounding; `n <= 0` leaves `b` untouched.

    Args:
        a (`torch.Tensor`): the previous tile; not modified. May be non-contiguous.
        b (`torch.Tensor`): the current tile, often a view into a larger tensor; written in place. May be
            non-contiguous or channels_last.
        blend_extent (`int`): the number of rows to blend before clamping; may be zero or negative.
        dim (`int`): the blended axis, counted from the end (-1, -2 or -3).

    Returns:
        `torch.Tensor`: `b` itself.
    """
    n = min(a.shape[dim], b.shape[dim], blend_extent)
    if n <= 0:
        return b
    shares_memory = (
        not torch.compiler.is_compiling() and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    )
    row_loop = n <= 2 or shares_memory or not (a.is_floating_point() and b.is_floating_point())
    if b.device.type == "cpu" and b.dtype in (torch.float16, torch.bfloat16):
        # PyTorch's CPU kernels stage half-precision operands mixed with float32 weights through float32 temporaries;
        # below eight rows that costs more than the loop's per-row overhead.
        row_loop = row_loop or n < 8
    if row_loop:
        # The loop itself: fewer kernels than the vectorized form for short seams, and the only exact
        # order when the tiles share memory (rows written early may be read later). Integer and complex tensors have
        # no opmath rounding to reproduce, so they take this path too.
        for y in range(n):
            b.select(dim, y).copy_(a.select(dim, y - n) * (1 - y / n) + b.select(dim, y) * (y / n))
        return b

    # Weights y / n and 1 - y / n as Python computes them (float64), cast once to each operand's opmath type.
    weight_shape = (n,) + (1,) * (-1 - dim)
    a_opmath = torch.float64 if a.dtype == torch.float64 else torch.float32
    b_opmath = torch.float64 if b.dtype == torch.float64 else torch.float32
    if b.device.type == "cuda":
        # Built on the device, so the blend can be captured in a CUDA graph. Divide by a tensor, not a Python number:
        # CUDA turns division by a host scalar into a multiplication by its reciprocal, which is not correctly rounded.
        rows = torch.arange(n, dtype=torch.float64, device=b.device).view(weight_shape)
        weight_b = rows / torch.full_like(rows, n)
        weight_a = (1 - weight_b).to(a_opmath)
        weight_b = weight_b.to(b_opmath)
    else:
        # Built on the host from Python floats, so no device needs float64.
        weight_a = torch.tensor([1 - y / n for y in range(n)], dtype=a_opmath).view(weight_shape).to(b.device)
        weight_b = torch.tensor([y / n for y in range(n)], dtype=b_opmath).view(weight_shape).to(b.device)

    a_seam = a.narrow(dim, a.shape[dim] - n, n)
    b_seam = b.narrow(dim, 0, n)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        # `out=` does not support autograd; round each product explicitly instead.
        b_seam.copy_((a_seam * weight_a).to(a.dtype) + (b_seam * weight_b).to(b.dtype))
    else:
        # Three kernels touch the seam, and each product is rounded to its operand's dtype when it is written.
        a_part = torch.mul(a_seam, weight_a, out=torch.empty_like(a_seam, memory_format=torch.contiguous_format))
        b_seam.mul_(weight_b).add_(a_part)
    return b


def blend_v(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    r"""Blend tile `a` into the top rows of tile `b` (axis -2) in place; returns `b`. See `blend_tiles`."""
    return blend_tiles(a, b, blend_extent, dim=-2)


def blend_h(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    r"""Blend tile `a` into the left columns of tile `b` (axis -1) in place; returns `b`. See `blend_tiles`."""
    return blend_tiles(a, b, blend_extent, dim=-1)


def blend_t(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    r"""Blend tile `a` into the first frames of tile `b` (axis -3) in place; returns `b`. See `blend_tiles`."""
    return blend_tiles(a, b, blend_extent, dim=-3)


BLEND_AXES = {"blend_v": -2, "blend_h": -1, "blend_t": -3}
"""The axis each blend method name works on, for the ranks diffusers passes them."""

BLEND_FUNCTIONS = {"blend_v": blend_v, "blend_h": blend_h, "blend_t": blend_t}

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
"""The floating dtypes the blend is exact for, by the names the command line and the reports use."""
