"""The row loops diffusers uses today, kept as the executable specification of `tileblend.blend`.

Each function is the loop of diffusers' autoencoders, written for any rank with the blended axis counted from the end
(-2, -1, -3, as for the ranks diffusers passes). Tests, `tileblend verify` and `tileblend bench` compare against them;
they are never installed into diffusers.
"""

import torch


def blend_v(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    """Row loop along axis -2; modifies `b` in place and returns it."""
    blend_extent = min(a.shape[-2], b.shape[-2], blend_extent)
    for y in range(blend_extent):
        b[..., y, :] = a[..., -blend_extent + y, :] * (1 - y / blend_extent) + b[..., y, :] * (y / blend_extent)
    return b


def blend_h(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    """Column loop along axis -1; modifies `b` in place and returns it."""
    blend_extent = min(a.shape[-1], b.shape[-1], blend_extent)
    for x in range(blend_extent):
        b[..., x] = a[..., -blend_extent + x] * (1 - x / blend_extent) + b[..., x] * (x / blend_extent)
    return b


def blend_t(a: torch.Tensor, b: torch.Tensor, blend_extent: int) -> torch.Tensor:
    """Frame loop along axis -3; modifies `b` in place and returns it."""
    blend_extent = min(a.shape[-3], b.shape[-3], blend_extent)
    for x in range(blend_extent):
        b[..., x, :, :] = a[..., -blend_extent + x, :, :] * (1 - x / blend_extent) + b[..., x, :, :] * (
            x / blend_extent
        )
    return b


REFERENCE_FUNCTIONS = {"blend_v": blend_v, "blend_h": blend_h, "blend_t": blend_t}
