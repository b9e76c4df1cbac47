"""The vectorized tile blend: the single source of truth for tileblend and for the code it writes into diffusers.

`blend_v`, `blend_h` and `blend_t` replace diffusers' row-by-row loops (`tileblend.reference`) with a few kernels over
the whole seam. `tileblend rewrite` writes each of them, with `self` added, into diffusers' `AutoencoderMixin` in
`models/autoencoders/vae.py`, and every autoencoder copies those methods under a "Copied from" comment; the runtime
patch, `tileblend verify` and `tileblend bench` call them as they are. So the functions are written as upstream code:
torch only, no branch besides the extent clamp and the choice of the opmath dtype, no device-specific path.

The contract, for floating tiles `a` and `b` of one dtype (float16, bfloat16, float32 or float64) on one device:

- With `n = min(a.shape[dim], b.shape[dim], blend_extent)`, row `y < n` of `b` along the blended axis (-2, -1, -3)
  becomes `a[y - n] * (1 - y / n) + b[y] * (y / n)`, with the loop's rounding: bit for bit the loop's result (same
  signed zeros, infinities and subnormals, NaN at the same places; NaN payloads are not defined by PyTorch, see
  `tileblend.compare`). `n <= 0` leaves `b` untouched.
- `b` is written IN PLACE and returned: diffusers' call sites keep using the tile they passed in. `a` is not modified.
  `a` and `b` must not overlap in memory (no call site passes overlapping tiles).
- Differentiable (autograd, forward-mode AD, torch.func) and free of host-to-device copies and synchronisation, so a
  blend can be captured in a CUDA graph. No float64 is needed unless the tiles are float64.

Why the arithmetic is exact: the loop multiplies by the Python doubles `1 - y / n` and `y / n`, which PyTorch casts
once to the dtype's opmath type (float32 for float16, bfloat16 and float32; float64 for float64), rounds each product
to the tile's dtype, then adds the two (in opmath) and rounds again. Here the weights are built on the tile's device
in the opmath type by tensor divisions, which IEEE rounds correctly: `y / n` is Python's `y / n` in either type;
Python's `1 - y / n` is `1 - y / n` in float64 and `(n - y) / n` in float32 for every n up to 4096 (float32
`1 - y / n` is not; docs/design.md gives the command that checks it). The divisor is a tensor, not a Python number,
because CUDA turns division by a host scalar into a multiplication by its reciprocal. Each product is computed in
opmath and cast to the tile's dtype, which rounds as the loop's `tensor * python_float` does; the sum is one in-place
add.
`torch.lerp`, `torch.addcmul` and fused kernels skip a rounding and are not exact.
"""

import torch


def blend_v(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    """
    Blends the last rows of `a` into the first rows of `b`, in place.

    With `n = min(a.shape[-2], b.shape[-2], blend_extent)`, each row `y < n` of `b` becomes
    `a[..., y - n, :] * (1 - y / n) + b[..., y, :] * (y / n)`, rounded as PyTorch rounds a tile times a Python
    float: each weight is the Python float cast to `torch.promote_types(b.dtype, torch.float32)`, and each product
    is rounded to `b.dtype` before the sum. When the weights are float32 (float32, float16 and bfloat16 tiles), the
    weight of `a` is computed as `(n - y) / n`, which gives that cast value where float32 `1 - y / n` does not, and
    the divisor is a tensor because PyTorch may divide by a Python number as a multiplication by its reciprocal,
    which rounds differently.

    Args:
        a (`torch.Tensor`):
            The tile above `b`. It is not modified.
        b (`torch.Tensor`):
            The tile to blend into, modified in place.
        blend_extent (`int`):
            How many rows to blend, clipped to both tiles; none when it is 0 or less.

    Returns:
        `torch.Tensor`: `b`.
    """
    blend_extent = min(a.shape[-2], b.shape[-2], blend_extent)
    if blend_extent <= 0:
        return b
    weight_dtype = torch.promote_types(b.dtype, torch.float32)
    y = torch.arange(blend_extent, dtype=weight_dtype, device=b.device).view(-1, 1)
    n = torch.full_like(y, blend_extent)
    weight_b = y / n
    weight_a = 1 - weight_b if weight_dtype == torch.float64 else (n - y) / n
    a_part = (a[..., -blend_extent:, :] * weight_a).to(b.dtype)
    b[..., :blend_extent, :].mul_(weight_b).add_(a_part)
    return b


def blend_h(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    """
    Blends the last columns of `a` into the first columns of `b`, in place.

    With `n = min(a.shape[-1], b.shape[-1], blend_extent)`, each column `x < n` of `b` becomes
    `a[..., x - n] * (1 - x / n) + b[..., x] * (x / n)`, rounded as PyTorch rounds a tile times a Python float:
    each weight is the Python float cast to `torch.promote_types(b.dtype, torch.float32)`, and each product is
    rounded to `b.dtype` before the sum. When the weights are float32 (float32, float16 and bfloat16 tiles), the
    weight of `a` is computed as `(n - x) / n`, which gives that cast value where float32 `1 - x / n` does not, and
    the divisor is a tensor because PyTorch may divide by a Python number as a multiplication by its reciprocal,
    which rounds differently.

    Args:
        a (`torch.Tensor`):
            The tile left of `b`. It is not modified.
        b (`torch.Tensor`):
            The tile to blend into, modified in place.
        blend_extent (`int`):
            How many columns to blend, clipped to both tiles; none when it is 0 or less.

    Returns:
        `torch.Tensor`: `b`.
    """
    blend_extent = min(a.shape[-1], b.shape[-1], blend_extent)
    if blend_extent <= 0:
        return b
    weight_dtype = torch.promote_types(b.dtype, torch.float32)
    x = torch.arange(blend_extent, dtype=weight_dtype, device=b.device)
    n = torch.full_like(x, blend_extent)
    weight_b = x / n
    weight_a = 1 - weight_b if weight_dtype == torch.float64 else (n - x) / n
    a_part = (a[..., -blend_extent:] * weight_a).to(b.dtype)
    b[..., :blend_extent].mul_(weight_b).add_(a_part)
    return b


def blend_t(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    """
    Blends the last frames of `a` into the first frames of `b`, in place.

    With `n = min(a.shape[-3], b.shape[-3], blend_extent)`, each frame `x < n` of `b` becomes
    `a[..., x - n, :, :] * (1 - x / n) + b[..., x, :, :] * (x / n)`, rounded as PyTorch rounds a tile times a
    Python float: each weight is the Python float cast to `torch.promote_types(b.dtype, torch.float32)`, and each
    product is rounded to `b.dtype` before the sum. When the weights are float32 (float32, float16 and bfloat16
    tiles), the weight of `a` is computed as `(n - x) / n`, which gives that cast value where float32 `1 - x / n`
    does not, and the divisor is a tensor because PyTorch may divide by a Python number as a multiplication by its
    reciprocal, which rounds differently.

    Args:
        a (`torch.Tensor`):
            The tile before `b`. It is not modified.
        b (`torch.Tensor`):
            The tile to blend into, modified in place.
        blend_extent (`int`):
            How many frames to blend, clipped to both tiles; none when it is 0 or less.

    Returns:
        `torch.Tensor`: `b`.
    """
    blend_extent = min(a.shape[-3], b.shape[-3], blend_extent)
    if blend_extent <= 0:
        return b
    weight_dtype = torch.promote_types(b.dtype, torch.float32)
    x = torch.arange(blend_extent, dtype=weight_dtype, device=b.device).view(-1, 1, 1)
    n = torch.full_like(x, blend_extent)
    weight_b = x / n
    weight_a = 1 - weight_b if weight_dtype == torch.float64 else (n - x) / n
    a_part = (a[..., -blend_extent:, :, :] * weight_a).to(b.dtype)
    b[..., :blend_extent, :, :].mul_(weight_b).add_(a_part)
    return b


BLEND_AXES = {"blend_v": -2, "blend_h": -1, "blend_t": -3}
"""The axis each blend method name works on, for the ranks diffusers passes them."""

BLEND_FUNCTIONS = {"blend_v": blend_v, "blend_h": blend_h, "blend_t": blend_t}

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
"""The floating dtypes the blend is exact for, by the names the command line and the reports use."""

DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}
"""The name of each dtype of `DTYPES`, as the command line and the reports write it."""
