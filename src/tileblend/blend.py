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
using the tile they passed in. Where the loop itself is the exact or the faster form they run it: short seams, tiles
that share memory, integer tensors, differentiable calls (autograd, forward-mode AD, torch.func) and, on the CPU, the
seam shapes where it was measured faster (see docs/design.md). On CUDA the weights are built on the device (no
host-to-device copy, no sync), so a blend can be captured in a CUDA graph. On other devices they are built on the host
from Python floats and moved, so no device needs float64 support.

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
    # The loop itself where it is the exact or the faster form: short seams (fewer kernels); integer and complex
    # tensors (no opmath rounding to reproduce); gradients, forward-mode AD and torch.func (`out=` is not
    # differentiable, and only the loop's own backward gives its signed zeros).
    row_loop = n <= 2 or not (a.is_floating_point() and b.is_floating_point())
    row_loop = row_loop or (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad))
    row_loop = row_loop or any(torch.autograd.forward_ad.unpack_dual(tile).tangent is not None for tile in (a, b))
    if b.device.type == "cpu":
        # Measured with one thread. The CPU kernels stage half-precision operands mixed with float32 weights through
        # float32 copies of the seam, while the loop's kernels multiply by a scalar in registers: in half precision
        # the loop is faster below eight rows, for rows of 16384 elements or more (video tiles), and for seams under 16
        # rows of 4096 elements or more (video latents). In float32 and float64 the loop is faster for rows of 2**20
        # elements or more, where a seam-sized temporary costs more than the loop's row-sized ones.
        row = b.numel() // b.shape[dim]
        if b.dtype in (torch.float16, torch.bfloat16):
            row_loop = row_loop or n < 8 or row >= 16384 or (n < 16 and row >= 4096)
        else:
            row_loop = row_loop or row >= 2**20
    if not (row_loop or torch.compiler.is_compiling()):
        # torch.func's wrapped tensors (vmap, grad, jvp) have no storage and no batching rule for `out=`. Tiles that
        # share memory need the loop's order: rows written early may be read later. A traced call cannot see storages,
        # so torch.compile does not detect tiles that overlap.
        row_loop = any(torch.func.debug_unwrap(tile) is not tile for tile in (a, b))
        row_loop = row_loop or a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    if row_loop:
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

    # Three kernels touch the seam, and each product is rounded to its operand's dtype when it is written. Expanding
    # `a`'s product to the seam raises for tiles the loop cannot blend either, before `b` is written.
    a_seam = a.narrow(dim, a.shape[dim] - n, n)
    b_seam = b.narrow(dim, 0, n)
    a_part = torch.mul(a_seam, weight_a, out=torch.empty_like(a_seam, memory_format=torch.contiguous_format))
    a_part = a_part.expand_as(b_seam)
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

DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
"""The name of each dtype of `DTYPES`, as the command line and the reports write it."""
